//! Just enough of the kernel's BTF (`/sys/kernel/btf/vmlinux` and a
//! module's split BTF such as `/sys/kernel/btf/sunrpc`) to find where a
//! struct member is: the raw-tracepoint programs read nfsd's transport and
//! request structs at offsets the running kernel's own type information
//! gives, as the classic programs read records at offsets the format files
//! give. Rust BPF has no CO-RE relocations, so the agent does the lookup.
//!
//! Format: include/uapi/linux/btf.h. A split BTF continues the base's type
//! ids and string offsets.

use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BtfError {
    #[error("not BTF data (bad magic or header)")]
    NotBtf,
    #[error("BTF data truncated at byte {0}")]
    Truncated(usize),
    #[error("BTF type {id} has unknown kind {kind}")]
    UnknownKind { id: u32, kind: u32 },
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
}

#[derive(Debug, Clone)]
struct Member {
    name_off: u32,
    ty: u32,
    bit_offset: u32,
}

#[derive(Debug, Clone)]
enum Type {
    /// STRUCT or UNION.
    Composite {
        name_off: u32,
        /// Bytes.
        size: u32,
        members: Vec<Member>,
    },
    /// VOLATILE, CONST, RESTRICT, TYPE_TAG: look through.
    Alias(u32),
    /// TYPEDEF: looked through too, and found by name.
    Typedef {
        name_off: u32,
        ty: u32,
    },
    Ptr(u32),
    Int {
        size: u32,
    },
    /// The parameters' types.
    FuncProto(Vec<u32>),
    Other,
}

/// One argument of a tracepoint, as its BTF prototype declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// A pointer to the struct or union of that name ("" for any other
    /// pointee).
    Ptr(String),
    /// An integer of that many bytes.
    Int(u32),
    Other,
}

pub struct Btf {
    /// Id of `types[0]` (1 for a base; the base's count + 1 for split BTF).
    first_id: u32,
    types: Vec<Type>,
    strings: Vec<u8>,
    /// Where this BTF's own strings start (the base's string length).
    str_base: u32,
    base: Option<Box<Btf>>,
}

fn u32_at(d: &[u8], at: usize) -> Result<u32, BtfError> {
    d.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(BtfError::Truncated(at))
}

impl Btf {
    /// Parse `data`, split on top of `base` when given.
    pub fn parse(data: &[u8], base: Option<Btf>) -> Result<Btf, BtfError> {
        if data.len() < 24 || data[0..2] != [0x9f, 0xeb] {
            return Err(BtfError::NotBtf);
        }
        let hdr_len = u32_at(data, 4)? as usize;
        let type_off = u32_at(data, 8)? as usize;
        let type_len = u32_at(data, 12)? as usize;
        let str_off = u32_at(data, 16)? as usize;
        let str_len = u32_at(data, 20)? as usize;
        let types_at = hdr_len.checked_add(type_off).ok_or(BtfError::NotBtf)?;
        let strs_at = hdr_len.checked_add(str_off).ok_or(BtfError::NotBtf)?;
        let tdata = data
            .get(types_at..types_at.saturating_add(type_len))
            .ok_or(BtfError::Truncated(types_at))?;
        let strings = data
            .get(strs_at..strs_at.saturating_add(str_len))
            .ok_or(BtfError::Truncated(strs_at))?
            .to_vec();
        let (first_id, str_base) = match &base {
            Some(b) => (
                b.first_id + b.types.len() as u32,
                b.str_base + b.strings.len() as u32,
            ),
            None => (1, 0),
        };
        let mut types = Vec::new();
        let mut at = 0usize;
        while at < tdata.len() {
            let id = first_id + types.len() as u32;
            let name_off = u32_at(tdata, at)?;
            let info = u32_at(tdata, at + 4)?;
            let size_or_type = u32_at(tdata, at + 8)?;
            at += 12;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kind_flag = info >> 31 == 1;
            let extra = match kind {
                2 | 7 | 8 | 9 | 10 | 11 | 12 | 16 | 18 => 0,
                1 | 14 | 17 => 4,
                3 => 12,
                4 | 5 | 15 | 19 => 12 * vlen,
                6 | 13 => 8 * vlen,
                _ => return Err(BtfError::UnknownKind { id, kind }),
            };
            let body = tdata
                .get(at..at + extra)
                .ok_or(BtfError::Truncated(types_at + at))?;
            let t = match kind {
                4 | 5 => {
                    let mut members = Vec::with_capacity(vlen);
                    for m in body.chunks_exact(12) {
                        let off = u32_at(m, 8)?;
                        members.push(Member {
                            name_off: u32_at(m, 0)?,
                            ty: u32_at(m, 4)?,
                            bit_offset: if kind_flag { off & 0x00ff_ffff } else { off },
                        });
                    }
                    Type::Composite {
                        name_off,
                        size: size_or_type,
                        members,
                    }
                }
                8 => Type::Typedef {
                    name_off,
                    ty: size_or_type,
                },
                9 | 10 | 11 | 18 => Type::Alias(size_or_type),
                2 => Type::Ptr(size_or_type),
                1 => Type::Int { size: size_or_type },
                13 => Type::FuncProto(
                    body.chunks_exact(8)
                        .map(|p| u32_at(p, 4))
                        .collect::<Result<_, _>>()?,
                ),
                _ => Type::Other,
            };
            types.push(t);
            at += extra;
        }
        Ok(Btf {
            first_id,
            types,
            strings,
            str_base,
            base: base.map(Box::new),
        })
    }

    /// `/sys/kernel/btf/vmlinux`, and `module` split on top of it.
    pub fn load(dir: &Path, module: Option<&str>) -> Result<Btf, BtfError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|e| BtfError::Read {
                path: p.display().to_string(),
                reason: e.to_string(),
            })
        };
        let vmlinux = Btf::parse(&read(&dir.join("vmlinux"))?, None)?;
        match module {
            Some(m) => Btf::parse(&read(&dir.join(m))?, Some(vmlinux)),
            None => Ok(vmlinux),
        }
    }

    fn ty(&self, id: u32) -> Option<&Type> {
        if id < self.first_id {
            return self.base.as_ref()?.ty(id);
        }
        self.types.get((id - self.first_id) as usize)
    }

    fn name(&self, off: u32) -> &str {
        if off < self.str_base {
            return self.base.as_ref().map_or("", |b| b.name(off));
        }
        let s = &self.strings[((off - self.str_base) as usize).min(self.strings.len())..];
        let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
        std::str::from_utf8(&s[..end]).unwrap_or("")
    }

    /// The id of the struct or union named `name` (this BTF first, then
    /// its base).
    pub fn composite(&self, name: &str) -> Option<u32> {
        let own = self.types.iter().position(|t| {
            matches!(t, Type::Composite { name_off, members, .. } if !members.is_empty() && self.name(*name_off) == name)
        });
        match own {
            Some(i) => Some(self.first_id + i as u32),
            None => self.base.as_ref()?.composite(name),
        }
    }

    /// The size in bytes of the struct or union named `name`.
    pub fn size_of(&self, name: &str) -> Option<u32> {
        match self.ty(self.composite(name)?)? {
            Type::Composite { size, .. } => Some(*size),
            _ => None,
        }
    }

    /// The id of the typedef named `name` (this BTF first, then its base).
    fn typedef(&self, name: &str) -> Option<u32> {
        let own = self.types.iter().position(
            |t| matches!(t, Type::Typedef { name_off, .. } if self.name(*name_off) == name),
        );
        match own {
            Some(i) => Some(self.first_id + i as u32),
            None => self.base.as_ref()?.typedef(name),
        }
    }

    /// The id of the typedef named `name`, and whether it is this BTF's
    /// own (a module's) rather than its base's.
    pub fn typedef_id(&self, name: &str) -> Option<(u32, bool)> {
        let id = self.typedef(name)?;
        Some((id, self.base.is_some() && id >= self.first_id))
    }

    /// The arguments a raw tracepoint program gets for `event`, from the
    /// kernel's `btf_trace_<event>` typedef (a pointer to a prototype whose
    /// first parameter, the context, is left out).
    pub fn tracepoint_args(&self, event: &str) -> Option<Vec<Arg>> {
        let def = self.typedef(&format!("btf_trace_{event}"))?;
        let Some(Type::Ptr(proto)) = self.ty(self.resolve(def)) else {
            return None;
        };
        let Some(Type::FuncProto(params)) = self.ty(self.resolve(*proto)) else {
            return None;
        };
        let arg = |ty: u32| match self.ty(self.resolve(ty)) {
            Some(Type::Int { size }) => Arg::Int(*size),
            Some(Type::Ptr(to)) => match self.ty(self.resolve(*to)) {
                Some(Type::Composite { name_off, .. }) => Arg::Ptr(self.name(*name_off).into()),
                _ => Arg::Ptr(String::new()),
            },
            _ => Arg::Other,
        };
        Some(params.iter().skip(1).map(|&t| arg(t)).collect())
    }

    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.ty(id) {
                Some(Type::Alias(next) | Type::Typedef { ty: next, .. }) => id = *next,
                _ => break,
            }
        }
        id
    }

    /// Byte offset and type of member `name` of composite `id`, looking
    /// into anonymous struct and union members.
    fn member(&self, id: u32, name: &str) -> Option<(u32, u32)> {
        let Some(Type::Composite { members, .. }) = self.ty(self.resolve(id)) else {
            return None;
        };
        for m in members {
            let mname = self.name(m.name_off);
            if mname == name {
                return Some((m.bit_offset / 8, m.ty));
            }
            if mname.is_empty() {
                if let Some((off, ty)) = self.member(m.ty, name) {
                    return Some((m.bit_offset / 8 + off, ty));
                }
            }
        }
        None
    }

    /// Byte offset of `path` (e.g. `["ns", "inum"]`) inside the struct
    /// named `root`.
    pub fn offset_of(&self, root: &str, path: &[&str]) -> Option<u32> {
        let mut id = self.composite(root)?;
        let mut total = 0;
        for name in path {
            let (off, ty) = self.member(id, name)?;
            total += off;
            id = ty;
        }
        Some(total)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds BTF blobs for tests: `(name, [(member, type id, bit offset)])`.
    pub(crate) struct Builder {
        types: Vec<u8>,
        strings: Vec<u8>,
        str_base: u32,
        next_id: u32,
    }

    impl Builder {
        pub(crate) fn new() -> Builder {
            Builder {
                types: Vec::new(),
                strings: vec![0],
                str_base: 0,
                next_id: 1,
            }
        }

        /// Split BTF on top of a base whose last id is `base_types` and
        /// string section `base_str_len` bytes long.
        pub(crate) fn split(base_types: u32, base_str_len: u32) -> Builder {
            Builder {
                types: Vec::new(),
                strings: vec![],
                str_base: base_str_len,
                next_id: base_types + 1,
            }
        }

        fn str(&mut self, s: &str) -> u32 {
            let off = self.str_base + self.strings.len() as u32;
            self.strings.extend_from_slice(s.as_bytes());
            self.strings.push(0);
            off
        }

        fn head(&mut self, name: &str, kind: u32, vlen: u32, kind_flag: bool, st: u32) -> u32 {
            let n = if name.is_empty() { 0 } else { self.str(name) };
            let info = (kind << 24) | vlen | if kind_flag { 1 << 31 } else { 0 };
            for v in [n, info, st] {
                self.types.extend_from_slice(&v.to_le_bytes());
            }
            self.next_id += 1;
            self.next_id - 1
        }

        pub(crate) fn int(&mut self, name: &str, size: u32) -> u32 {
            let id = self.head(name, 1, 0, false, size);
            self.types.extend_from_slice(&(size * 8).to_le_bytes());
            id
        }

        pub(crate) fn ptr(&mut self, to: u32) -> u32 {
            self.head("", 2, 0, false, to)
        }

        pub(crate) fn typedef(&mut self, name: &str, to: u32) -> u32 {
            self.head(name, 8, 0, false, to)
        }

        pub(crate) fn konst(&mut self, to: u32) -> u32 {
            self.head("", 10, 0, false, to)
        }

        /// A prototype (returning void) with these parameter types.
        pub(crate) fn func_proto(&mut self, params: &[u32]) -> u32 {
            let id = self.head("", 13, params.len() as u32, false, 0);
            for p in params {
                self.types.extend_from_slice(&0u32.to_le_bytes());
                self.types.extend_from_slice(&p.to_le_bytes());
            }
            id
        }

        /// `btf_trace_<event>`: a pointer to a prototype taking the
        /// context pointer, then `args`.
        pub(crate) fn tracepoint(&mut self, event: &str, args: &[u32]) -> u32 {
            let void_ptr = self.ptr(0);
            let mut params = vec![void_ptr];
            params.extend_from_slice(args);
            let proto = self.func_proto(&params);
            let ptr = self.ptr(proto);
            self.typedef(&format!("btf_trace_{event}"), ptr)
        }

        /// kind_flag set: offsets carry a bitfield size in the top byte.
        pub(crate) fn composite(
            &mut self,
            union: bool,
            name: &str,
            size: u32,
            kind_flag: bool,
            members: &[(&str, u32, u32)],
        ) -> u32 {
            let names: Vec<u32> = members
                .iter()
                .map(|(n, _, _)| if n.is_empty() { 0 } else { self.str(n) })
                .collect();
            let id = self.head(
                name,
                if union { 5 } else { 4 },
                members.len() as u32,
                kind_flag,
                size,
            );
            for (n, (_, ty, off)) in names.iter().zip(members) {
                let off = if kind_flag { off | (3 << 24) } else { *off };
                for v in [*n, *ty, off] {
                    self.types.extend_from_slice(&v.to_le_bytes());
                }
            }
            id
        }

        pub(crate) fn last_id(&self) -> u32 {
            self.next_id - 1
        }

        pub(crate) fn str_len(&self) -> u32 {
            self.strings.len() as u32
        }

        pub(crate) fn build(&self) -> Vec<u8> {
            let mut b = Vec::new();
            b.extend_from_slice(&[0x9f, 0xeb, 1, 0]);
            let tl = self.types.len() as u32;
            for v in [24u32, 0, tl, tl, self.strings.len() as u32] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&self.types);
            b.extend_from_slice(&self.strings);
            b
        }
    }

    #[test]
    fn members_through_anonymous_unions_typedefs_and_split_btf() {
        let mut base = Builder::new();
        let u32t = base.int("unsigned int", 4);
        let u64t = base.int("long unsigned int", 8);
        // struct ns_common { u64 stashed; union { u32 count; u32 other; }; u32 inum; }
        let anon = base.composite(
            true,
            "",
            4,
            false,
            &[("count", u32t, 0), ("other", u32t, 0)],
        );
        let ns = base.composite(
            false,
            "ns_common",
            16,
            false,
            &[("stashed", u64t, 0), ("", anon, 64), ("inum", u32t, 96)],
        );
        let nsdef = base.typedef("ns_common_t", ns);
        base.composite(
            false,
            "net",
            256,
            false,
            &[("passive", u32t, 0), ("ns", nsdef, 8 * 120)],
        );
        let base_blob = base.build();
        let b = Btf::parse(&base_blob, None).unwrap();
        assert_eq!(b.offset_of("net", &["ns", "inum"]), Some(120 + 12));
        assert_eq!(
            b.offset_of("ns_common", &["count"]),
            Some(8),
            "inside the anonymous union"
        );
        assert_eq!(b.offset_of("net", &["nope"]), None);
        assert_eq!(b.offset_of("svc_xprt", &["xpt_flags"]), None);

        // The module: its ids and strings continue the base's; a bitfield
        // struct (kind_flag) keeps only the bit offset.
        let mut m = Builder::split(base.last_id(), base.str_len());
        let netp = m.ptr(b.composite("net").unwrap());
        m.composite(
            false,
            "svc_xprt",
            600,
            true,
            &[("xpt_flags", u64t, 8 * 72), ("xpt_net", netp, 8 * 560)],
        );
        let s = Btf::parse(&m.build(), Some(b)).unwrap();
        assert_eq!(s.offset_of("svc_xprt", &["xpt_flags"]), Some(72));
        assert_eq!(s.offset_of("svc_xprt", &["xpt_net"]), Some(560));
        assert_eq!(
            s.offset_of("net", &["ns", "inum"]),
            Some(132),
            "found in the base"
        );
    }

    #[test]
    fn tracepoint_arguments_from_the_btf_trace_typedef() {
        let mut base = Builder::new();
        let ulong = base.int("long unsigned int", 8);
        let b = Btf::parse(&base.build(), None).unwrap();
        // The module's prototypes: 6.6+ (xprt, flags) and 6.1 (xprt, rqst).
        let mut m = Builder::split(base.last_id(), base.str_len());
        let xprt = m.composite(false, "svc_xprt", 600, false, &[("xpt_flags", ulong, 0)]);
        let rqst = m.composite(false, "svc_rqst", 600, false, &[("rq_flags", ulong, 0)]);
        let cxprt = m.konst(xprt);
        let xprtp = m.ptr(cxprt);
        let rqstp = m.ptr(rqst);
        let enqueue = m.tracepoint("svc_xprt_enqueue", &[xprtp, ulong]);
        m.tracepoint("svc_xprt_do_enqueue", &[xprtp, rqstp]);
        let s = Btf::parse(&m.build(), Some(b)).unwrap();
        // The typed program's attach target: the module's own typedef
        // (loaded against the module's BTF object), or vmlinux's.
        assert_eq!(
            s.typedef_id("btf_trace_svc_xprt_enqueue"),
            Some((enqueue, true))
        );
        assert_eq!(s.typedef_id("btf_trace_svc_xprt_dequeue"), None);
        let mut vmlinux = Builder::new();
        let int = vmlinux.int("int", 4);
        let builtin = vmlinux.tracepoint("svc_xprt_enqueue", &[int]);
        let v = Btf::parse(&vmlinux.build(), None).unwrap();
        assert_eq!(
            v.typedef_id("btf_trace_svc_xprt_enqueue"),
            Some((builtin, false))
        );
        assert_eq!(
            s.tracepoint_args("svc_xprt_enqueue"),
            Some(vec![Arg::Ptr("svc_xprt".into()), Arg::Int(8)])
        );
        assert_eq!(
            s.tracepoint_args("svc_xprt_do_enqueue"),
            Some(vec![
                Arg::Ptr("svc_xprt".into()),
                Arg::Ptr("svc_rqst".into())
            ])
        );
        assert_eq!(s.tracepoint_args("svc_xprt_dequeue"), None);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert_eq!(Btf::parse(b"", None).err(), Some(BtfError::NotBtf));
        assert_eq!(Btf::parse(&[0u8; 64], None).err(), Some(BtfError::NotBtf));
        let mut b = Builder::new();
        let t = b.int("int", 4);
        b.composite(false, "s", 8, false, &[("a", t, 0)]);
        let blob = b.build();
        for cut in 24..blob.len() {
            let _ = Btf::parse(&blob[..cut], None);
        }
        let mut bad = blob.clone();
        bad[24 + 7] = 30; // kind 30 in the first type's info
        assert!(matches!(
            Btf::parse(&bad, None),
            Err(BtfError::UnknownKind { .. })
        ));
    }

    /// The running kernel's own BTF, where there is one: struct net has
    /// its namespace inode number inside, and task_struct a pid.
    #[test]
    fn this_kernels_vmlinux() {
        let dir = Path::new("/sys/kernel/btf");
        if !dir.join("vmlinux").exists() {
            crate::testing::skip("no /sys/kernel/btf/vmlinux");
            return;
        }
        let b = Btf::load(dir, None).unwrap();
        let inum = b.offset_of("net", &["ns", "inum"]).unwrap();
        assert!(inum > 0 && inum < 4096, "{inum}");
        let pid = b.offset_of("task_struct", &["pid"]).unwrap();
        assert!(pid > 0 && pid < 16384, "{pid}");
        // sched_switch(bool preempt, prev, next, prev_state) since 5.18.
        let args = b.tracepoint_args("sched_switch").unwrap();
        assert!(args.contains(&Arg::Ptr("task_struct".into())), "{args:?}");
    }
}
