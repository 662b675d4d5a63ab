//! The typed svc_stats_latency program (`tp_btf`, see
//! `nfsdtop_common::typed`), loaded and attached here rather than by aya.
//! svc_stats_latency is a tracepoint of the sunrpc module: the kernel
//! finds its type (`btf_trace_svc_stats_latency`) only in the module's
//! own BTF object, which the load must name (`attach_btf_obj_fd`), and
//! aya 0.14 loads `tp_btf` programs against vmlinux's BTF only. So the
//! program's instructions come from the object through aya-obj, its map
//! references are pointed at the maps aya created (the same maps every
//! other program uses), and three `bpf()` calls find the module's BTF
//! object, load the program and attach it. Where a step fails, the raw
//! program takes the slot and the access report says why.

use std::collections::HashSet;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use aya::maps::Map;
use aya_obj::generated::{
    bpf_attach_type, bpf_attr, bpf_btf_info, bpf_cmd, bpf_insn, bpf_prog_type,
};
use nfsdtop_common::typed::{RqstOffsets, PROGRAM};

use super::btf::Btf;
use super::raw::KernelOffsets;

/// The event the program attaches to.
const EVENT: &str = "svc_stats_latency";
/// The module whose tracepoint it is.
const MODULE: &str = "sunrpc";

/// The offsets the program reads at, where the kernel's BTF has every
/// one (the verifier checks each load the program has, used or not).
pub fn offsets(k: &KernelOffsets) -> Option<RqstOffsets> {
    let (arg_len, res_len) = k.rq_lens?;
    let [prog, vers, proc] = k.rq_procs?;
    Some(RqstOffsets {
        rq_xprt: k.rq_xprt.into(),
        rq_stime: k.rq_stime.into(),
        rq_arg_len: arg_len.into(),
        rq_res_len: res_len.into(),
        rq_prog: prog.into(),
        rq_vers: vers.into(),
        rq_proc: proc.into(),
    })
}

/// The loaded and attached program; dropping it detaches it.
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

/// The program's instructions, its map references set to the maps aya
/// created, and its license: made by [`prepare`] while the object still
/// holds every map (the live source takes some out of it: the ring, the
/// memory-mapped arrays), and valid while those maps live.
pub struct Prepared {
    insns: Vec<bpf_insn>,
    license: CString,
}

/// Load the prepared program and attach it to svc_stats_latency; the
/// kernel's BTF is read from `btf_dir`.
pub fn attach(prepared: &Prepared, btf_dir: &Path) -> Result<TypedLink, String> {
    let prog = load_program(prepared, btf_dir)?;
    let mut attr = zeroed_attr();
    attr.raw_tracepoint.prog_fd = prog.as_raw_fd() as u32;
    let link = sys_bpf_fd(bpf_cmd::BPF_RAW_TRACEPOINT_OPEN, &mut attr)
        .map_err(|e| format!("cannot attach {PROGRAM} to {EVENT}: {e}"))?;
    Ok(TypedLink { prog, _link: link })
}

/// Load (verify) the prepared program without attaching it: what
/// `nfsdtop doctor` checks.
pub fn verify(prepared: &Prepared, btf_dir: &Path) -> Result<(), String> {
    load_program(prepared, btf_dir).map(drop)
}

fn load_program(prepared: &Prepared, btf_dir: &Path) -> Result<OwnedFd, String> {
    let (btf_id, in_module) = target(btf_dir)?;
    let module_btf = if in_module {
        Some(module_btf(MODULE)?)
    } else {
        None
    };
    load(
        &prepared.insns,
        &prepared.license,
        btf_id,
        module_btf.as_ref(),
    )
}

/// The BTF id of `btf_trace_svc_stats_latency`, and whether it is the
/// module's (else sunrpc is built in and the id is vmlinux's).
fn target(btf_dir: &Path) -> Result<(u32, bool), String> {
    let module = btf_dir.join(MODULE).exists().then_some(MODULE);
    let btf = Btf::load(btf_dir, module).map_err(|e| e.to_string())?;
    let name = format!("btf_trace_{EVENT}");
    btf.typedef_id(&name)
        .ok_or_else(|| format!("the kernel's BTF has no {name}"))
}

/// Prepare the typed program of `object`, whose maps aya created in
/// `ebpf` (every one of them still there: a map missing would leave its
/// references pointing at another).
pub fn prepare(ebpf: &aya::Ebpf, object: &[u8]) -> Result<Prepared, String> {
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
    let prog = obj
        .programs
        .get(PROGRAM)
        .ok_or_else(|| format!("the BPF object has no program {PROGRAM}"))?;
    let function = obj
        .functions
        .get(&prog.function_key())
        .ok_or_else(|| format!("the BPF object has no code for {PROGRAM}"))?;
    Ok(Prepared {
        insns: function.instructions.clone(),
        license: prog.license.clone(),
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
        for (d, s) in u.prog_name.iter_mut().zip(&PROGRAM.as_bytes()[..15]) {
            *d = *s as _;
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
                "the kernel's verifier rejected {PROGRAM}: {e} ({})",
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

    /// The map each `ld_imm64` of a prepared program refers to, by name.
    fn referenced(ebpf: &aya::Ebpf, p: &Prepared) -> Vec<String> {
        let names: std::collections::HashMap<RawFd, &str> = ebpf
            .maps()
            .filter_map(|(n, m)| Some((map_fd(m)?, n)))
            .collect();
        p.insns
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
        let mut ebpf = bpf::open(1 << 20, RqstOffsets::default()).expect("load the BPF object");
        let p = prepare(&ebpf, bpf::OBJECT).expect("prepare");
        let refs = referenced(&ebpf, &p);
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
        let e = prepare(&ebpf, bpf::OBJECT).err().expect("refused");
        assert!(e.contains("EVENTS"), "{e}");
    }
}
