//! The typed programs (`tp_btf`, see `nfsdtop_common::typed`) of
//! svc_xprt_enqueue, svc_xprt_dequeue and svc_stats_latency, loaded and
//! attached here rather than by aya. They
//! are tracepoints of the sunrpc module: the kernel finds their types
//! (`btf_trace_<event>`) only in the module's own BTF object, which the
//! load must name (`attach_btf_obj_fd`), and aya 0.14 loads `tp_btf`
//! programs against vmlinux's BTF only. So the programs' instructions come
//! from the object through aya-obj, their map references are pointed at
//! the maps aya created (the same maps every other program uses), and
//! three `bpf()` calls find the module's BTF object, load a program and
//! attach it. Where a step fails, the slot's raw program takes its place
//! and the access report says why.

use std::collections::HashSet;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use aya::maps::Map;
use aya_obj::generated::{
    bpf_attach_type, bpf_attr, bpf_btf_info, bpf_cmd, bpf_insn, bpf_prog_type,
};
use nfsdtop_common::{typed::TypedOffsets, Slot};

use super::btf::Btf;
use super::raw::KernelOffsets;

/// The module whose tracepoints they are.
const MODULE: &str = "sunrpc";

/// The offsets the programs read at, 0 for a member the kernel's BTF
/// lacks (see [`TypedOffsets`]).
pub fn offsets(k: &KernelOffsets) -> TypedOffsets {
    let (arg_len, res_len) = k.rq_lens.unwrap_or_default();
    let [prog, vers, proc] = k.rq_procs.unwrap_or_default();
    TypedOffsets {
        rq_xprt: k.rq_xprt.into(),
        rq_stime: k.rq_stime.into(),
        rq_arg_len: arg_len.into(),
        rq_res_len: res_len.into(),
        rq_prog: prog.into(),
        rq_vers: vers.into(),
        rq_proc: proc.into(),
        xpt_flags: k.xpt_flags.into(),
        xpt_nr_rqsts: k.xpt_nr_rqsts.unwrap_or(0).into(),
        enqueue_flags_arg: u64::from(k.flags_arg(Slot::Enqueue)),
    }
}

/// Slot `s`'s typed program's name in the object, if it has one.
pub fn program_name(s: Slot) -> Option<&'static str> {
    s.info().raw?.typed
}

/// A loaded and attached program; dropping it detaches it.
#[derive(Debug)]
pub struct TypedLink {
    prog: OwnedFd,
    _link: OwnedFd,
}

impl TypedLink {
    /// The program's file descriptor (for its kernel statistics).
    pub fn prog_fd(&self) -> RawFd {
        self.prog.as_raw_fd()
    }
}

/// The typed programs' instructions, their map references set to the
/// maps aya created, their license, the offsets the object was loaded
/// with, and what the kernel attaches them to: made by [`prepare`] while
/// the object still holds every map (the live source takes some out of
/// it: the ring, the memory-mapped arrays), and valid while those maps
/// live.
pub struct Prepared {
    programs: Vec<(Slot, Vec<bpf_insn>)>,
    license: CString,
    offsets: TypedOffsets,
    /// Each program's `btf_trace_<event>` id, and whether it is the
    /// module's, from one read of the kernel's BTF (or why not).
    targets: Result<Vec<(Slot, u32, bool)>, String>,
    /// The module's BTF object, looked up once where a target is the
    /// module's (or why it was not found).
    module_btf: Option<Result<OwnedFd, String>>,
}

/// Load slot `s`'s prepared program and attach it to its tracepoint.
pub fn attach(prepared: &Prepared, s: Slot) -> Result<TypedLink, String> {
    let prog = load_program(prepared, s)?;
    let mut attr = zeroed_attr();
    attr.raw_tracepoint.prog_fd = prog.as_raw_fd() as u32;
    let link = sys_bpf_fd(bpf_cmd::BPF_RAW_TRACEPOINT_OPEN, &mut attr)
        .map_err(|e| format!("cannot attach it to {}: {e}", s.name()))?;
    Ok(TypedLink { prog, _link: link })
}

/// Load (verify) every prepared program without attaching it: what
/// `nfsdtop doctor` checks.
pub fn verify(prepared: &Prepared) -> Result<(), String> {
    for (s, _) in &prepared.programs {
        load_program(prepared, *s).map_err(|e| format!("{}: {e}", s.name()))?;
    }
    Ok(())
}

fn load_program(prepared: &Prepared, s: Slot) -> Result<OwnedFd, String> {
    let name = program_name(s).ok_or("no typed program")?;
    // The verifier checks every load a program has, used or not: each
    // needs its offsets to be members of the kernel's structs.
    let o = &prepared.offsets;
    let (known, of) = match s {
        Slot::StatsLatency => (o.complete(), "svc_rqst"),
        Slot::Enqueue => (o.enqueue_complete(), "svc_xprt"),
        _ => (o.rq_xprt != 0, "svc_rqst"),
    };
    if !known {
        return Err(format!("the kernel's BTF lacks a {of} member it reads"));
    }
    let insns = prepared
        .programs
        .iter()
        .find(|(p, _)| *p == s)
        .map(|(_, i)| i)
        .ok_or_else(|| format!("the BPF object has no program {name}"))?;
    let &(_, btf_id, in_module) = prepared
        .targets
        .as_ref()?
        .iter()
        .find(|(t, ..)| *t == s)
        .ok_or_else(|| format!("the kernel's BTF has no btf_trace_{}", s.name()))?;
    let module_btf = match (in_module, &prepared.module_btf) {
        (false, _) => None,
        (true, Some(Ok(fd))) => Some(fd),
        (true, Some(Err(why))) => return Err(why.clone()),
        (true, None) => return Err(format!("the {MODULE} module's BTF was not looked up")),
    };
    load(name, insns, &prepared.license, btf_id, module_btf)
}

/// The BTF id of each slot's `btf_trace_<event>` (slots without a typed
/// program, or whose typedef is missing, left out), and whether it is
/// the module's (else sunrpc is built in and the id is vmlinux's): one
/// read of the kernel's BTF in `btf_dir`.
fn targets(btf_dir: &Path) -> Result<Vec<(Slot, u32, bool)>, String> {
    let module = btf_dir.join(MODULE).exists().then_some(MODULE);
    let btf = Btf::load(btf_dir, module).map_err(|e| e.to_string())?;
    Ok(Slot::ALL
        .into_iter()
        .filter(|&s| program_name(s).is_some())
        .filter_map(|s| {
            let (id, own) = btf.typedef_id(&format!("btf_trace_{}", s.name()))?;
            Some((s, id, own))
        })
        .collect())
}

/// Prepare the typed programs of `object`, whose maps aya created in
/// `ebpf` (every one of them still there: a map missing would leave its
/// references pointing at another) with `offsets` in its read-only global,
/// for the kernel whose BTF is in `btf_dir`.
pub fn prepare(
    ebpf: &aya::Ebpf,
    object: &[u8],
    offsets: TypedOffsets,
    btf_dir: &Path,
) -> Result<Prepared, String> {
    let mut obj = aya_obj::Object::parse(object).map_err(|e| format!("the BPF object: {e}"))?;
    let mut fds = Vec::new();
    for (name, map) in ebpf.maps() {
        let fd = map_fd(map).ok_or_else(|| format!("map {name} is of a kind not expected here"))?;
        fds.push((name.to_string(), fd));
    }
    if let Some(missing) = obj.maps.keys().find(|n| !fds.iter().any(|(f, _)| f == *n)) {
        return Err(format!("map {missing} is no longer in the loaded object"));
    }
    let text_sections: HashSet<usize> = obj.functions.keys().map(|(s, _)| *s).collect();
    // relocate_maps changes the object it reads the maps of: read a copy.
    let defs = obj.maps.clone();
    let maps = fds
        .iter()
        .filter_map(|(name, fd)| defs.get(name).map(|m| (name.as_str(), *fd, m)));
    obj.relocate_maps(maps, &text_sections)
        .map_err(|e| format!("relocating the BPF object's maps: {e}"))?;
    obj.relocate_calls(&text_sections)
        .map_err(|e| format!("relocating the BPF object's calls: {e}"))?;
    let mut programs = Vec::new();
    let mut license = None;
    for s in Slot::ALL {
        let Some(name) = program_name(s) else {
            continue;
        };
        let prog = obj
            .programs
            .get(name)
            .ok_or_else(|| format!("the BPF object has no program {name}"))?;
        let function = obj
            .functions
            .get(&prog.function_key())
            .ok_or_else(|| format!("the BPF object has no code for {name}"))?;
        programs.push((s, function.instructions.clone()));
        license = Some(prog.license.clone());
    }
    let targets = targets(btf_dir);
    let in_module = targets
        .as_ref()
        .is_ok_and(|t| t.iter().any(|&(_, _, own)| own));
    Ok(Prepared {
        programs,
        license: license.ok_or("the tracepoint table names no typed program")?,
        offsets,
        targets,
        module_btf: in_module.then(|| module_btf(MODULE)),
    })
}

/// A map's file descriptor (aya keeps it open for as long as `ebpf`).
fn map_fd(map: &Map) -> Option<RawFd> {
    use std::os::fd::AsFd;
    match map {
        Map::Array(m)
        | Map::PerCpuArray(m)
        | Map::RingBuf(m)
        | Map::HashMap(m)
        | Map::PerCpuHashMap(m)
        | Map::LruHashMap(m)
        | Map::PerCpuLruHashMap(m)
        | Map::Unsupported(m) => Some(m.fd().as_fd().as_raw_fd()),
        _ => None,
    }
}

/// The kernel's BTF object of module `name` (an open descriptor).
fn module_btf(name: &str) -> Result<OwnedFd, String> {
    let mut id = 0u32;
    loop {
        let mut attr = zeroed_attr();
        attr.__bindgen_anon_6.__bindgen_anon_1.start_id = id;
        match sys_bpf(bpf_cmd::BPF_BTF_GET_NEXT_ID, &mut attr) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => break,
            Err(e) => return Err(format!("listing the kernel's BTF objects: {e}")),
        }
        // SAFETY: the kernel wrote next_id of the union member set above.
        id = unsafe { attr.__bindgen_anon_6.next_id };
        let mut attr = zeroed_attr();
        attr.__bindgen_anon_6.__bindgen_anon_1.btf_id = id;
        // Gone since it was listed: go on with the next.
        let Ok(fd) = sys_bpf_fd(bpf_cmd::BPF_BTF_GET_FD_BY_ID, &mut attr) else {
            continue;
        };
        let mut name_buf = [0u8; 64];
        let mut info = bpf_btf_info {
            btf: 0,
            btf_size: 0,
            id: 0,
            name: name_buf.as_mut_ptr() as u64,
            name_len: name_buf.len() as u32,
            kernel_btf: 0,
        };
        let mut attr = zeroed_attr();
        attr.info.bpf_fd = fd.as_raw_fd() as u32;
        attr.info.info_len = std::mem::size_of::<bpf_btf_info>() as u32;
        attr.info.info = &raw mut info as u64;
        if sys_bpf(bpf_cmd::BPF_OBJ_GET_INFO_BY_FD, &mut attr).is_err() {
            continue;
        }
        let len = name_buf.iter().position(|&c| c == 0).unwrap_or(0);
        if info.kernel_btf != 0 && &name_buf[..len] == name.as_bytes() {
            return Ok(fd);
        }
    }
    Err(format!("the kernel has no BTF object for module {name}"))
}

/// BPF_PROG_LOAD as a `tp_btf` program for type `btf_id` (of
/// `module_btf`, else of vmlinux). On a rejection the load is repeated
/// with the verifier's log, whose last lines are the message.
fn load(
    name: &str,
    insns: &[bpf_insn],
    license: &CString,
    btf_id: u32,
    module_btf: Option<&OwnedFd>,
) -> Result<OwnedFd, String> {
    let attempt = |log: &mut [u8]| {
        let mut attr = zeroed_attr();
        // SAFETY: writing fields of the union member BPF_PROG_LOAD reads.
        let u = unsafe { &mut attr.__bindgen_anon_3 };
        u.prog_type = bpf_prog_type::BPF_PROG_TYPE_TRACING as u32;
        u.expected_attach_type = bpf_attach_type::BPF_TRACE_RAW_TP as u32;
        u.insns = insns.as_ptr() as u64;
        u.insn_cnt = insns.len() as u32;
        u.license = license.as_ptr() as u64;
        u.attach_btf_id = btf_id;
        if let Some(fd) = module_btf {
            u.__bindgen_anon_1.attach_btf_obj_fd = fd.as_raw_fd() as u32;
        }
        // The kernel keeps 15 bytes of a name (bpftool shows them).
        for (d, s) in u.prog_name.iter_mut().zip(name.bytes().take(15)) {
            *d = s as _;
        }
        if !log.is_empty() {
            u.log_level = 1;
            u.log_buf = log.as_mut_ptr() as u64;
            u.log_size = log.len() as u32;
        }
        sys_bpf_fd(bpf_cmd::BPF_PROG_LOAD, &mut attr)
    };
    match attempt(&mut []) {
        Ok(fd) => Ok(fd),
        Err(e) => {
            let mut log = vec![0u8; 1 << 20];
            let _ = attempt(&mut log);
            let end = log.iter().position(|&c| c == 0).unwrap_or(0);
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: Vec<&str> = text.lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(format!(
                "the kernel's verifier rejected {name}: {e} ({})",
                tail.join(" / ")
            ))
        }
    }
}

fn zeroed_attr() -> bpf_attr {
    // SAFETY: bpf_attr is a C union of integer fields: all zeroes is a
    // valid value, and the kernel requires unused fields to be zero.
    unsafe { std::mem::zeroed() }
}

fn sys_bpf(cmd: bpf_cmd, attr: &mut bpf_attr) -> io::Result<i64> {
    // SAFETY: the bpf() syscall with an attr of the size passed; the
    // buffers it points to (instructions, license, log, info) outlive the
    // call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut bpf_attr,
            std::mem::size_of::<bpf_attr>(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A `bpf()` command that returns a new file descriptor.
fn sys_bpf_fd(cmd: bpf_cmd, attr: &mut bpf_attr) -> io::Result<OwnedFd> {
    let fd = sys_bpf(cmd, attr)?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(test)]
mod tests {
    use super::super::bpf;
    use super::*;

    fn no_btf() -> &'static Path {
        Path::new("/nonexistent")
    }

    /// The map each `ld_imm64` of a prepared program refers to, by name.
    fn referenced(ebpf: &aya::Ebpf, p: &Prepared, s: Slot) -> Vec<String> {
        let names: std::collections::HashMap<RawFd, &str> = ebpf
            .maps()
            .filter_map(|(n, m)| Some((map_fd(m)?, n)))
            .collect();
        let insns = &p.programs.iter().find(|(p, _)| *p == s).unwrap().1;
        insns
            .iter()
            .filter(|i| i.code == 0x18 && i.src_reg() != 0)
            .map(|i| {
                names
                    .get(&i.imm)
                    .map_or(format!("fd {}", i.imm), |n| n.to_string())
            })
            .collect()
    }

    /// Needs root and BPF (as CI has): the typed program's map references
    /// are the maps aya created, by name (the ring it reserves records in
    /// among them), and preparing after the live source took a map out of
    /// the object is refused rather than pointing its references elsewhere.
    #[test]
    fn the_typed_program_refers_to_the_maps_aya_created() {
        let mut ebpf = bpf::open(1 << 20, TypedOffsets::default(), bpf::Hosting::None)
            .expect("load the BPF object");
        let p = prepare(&ebpf, bpf::OBJECT, TypedOffsets::default(), no_btf()).expect("prepare");
        let slots: Vec<Slot> = p.programs.iter().map(|(s, _)| *s).collect();
        assert_eq!(slots, [Slot::Enqueue, Slot::Dequeue, Slot::StatsLatency]);
        let refs = referenced(&ebpf, &p, Slot::StatsLatency);
        for want in [
            "RAWCONFIG",
            "EVENTS",
            "EXEC_TOTALS",
            "KNOWN_XPRTS",
            ".rodata",
        ] {
            assert!(refs.iter().any(|r| r == want), "{want} not in {refs:?}");
        }
        assert!(refs.iter().all(|r| !r.starts_with("fd ")), "{refs:?}");
        let _ring = ebpf.take_map("EVENTS").unwrap();
        let e = prepare(&ebpf, bpf::OBJECT, TypedOffsets::default(), no_btf())
            .err()
            .expect("refused");
        assert!(e.contains("EVENTS"), "{e}");
    }

    /// A program whose offsets the kernel's BTF did not give is not
    /// loaded at all: the verifier would check its load at offset 0, which
    /// is another member, and the dequeue program would take that member
    /// for the transport.
    #[test]
    fn a_program_is_not_loaded_without_its_offsets() {
        let ebpf = bpf::open(1 << 20, TypedOffsets::default(), bpf::Hosting::None)
            .expect("load the BPF object");
        let only_xprt = TypedOffsets {
            rq_xprt: 8,
            ..TypedOffsets::default()
        };
        let p = prepare(&ebpf, bpf::OBJECT, only_xprt, no_btf()).expect("prepare");
        let e = attach(&p, Slot::StatsLatency).unwrap_err();
        assert!(e.contains("lacks a svc_rqst member"), "{e}");
        let e = attach(&p, Slot::Dequeue).unwrap_err();
        assert!(
            !e.contains("lacks a svc_rqst member"),
            "past the offsets: {e}"
        );
        let none = prepare(&ebpf, bpf::OBJECT, TypedOffsets::default(), no_btf()).expect("prepare");
        let e = attach(&none, Slot::Dequeue).unwrap_err();
        assert!(e.contains("lacks a svc_rqst member"), "{e}");
        let e = attach(&none, Slot::Enqueue).unwrap_err();
        assert!(e.contains("lacks a svc_xprt member"), "{e}");
        let e = attach(&p, Slot::Enqueue).unwrap_err();
        assert!(e.contains("lacks a svc_xprt member"), "{e}");
        let depth_too = TypedOffsets {
            xpt_flags: 8,
            xpt_nr_rqsts: 16,
            ..TypedOffsets::default()
        };
        let p = prepare(&ebpf, bpf::OBJECT, depth_too, no_btf()).expect("prepare");
        let e = attach(&p, Slot::Enqueue).unwrap_err();
        assert!(
            !e.contains("lacks a svc_xprt member"),
            "past the offsets: {e}"
        );
    }
}
