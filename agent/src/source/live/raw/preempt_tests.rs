//! The plan on a kernel that can preempt raw programs: twin programs by
//! default, raw programs without them with `--keep-raw-tracepoints`.

use super::tests::{btf, fixture};
use super::*;

/// A 6.16+ kernel's layout, and offsets from its BTF.
fn kernel() -> (Layout, KernelOffsets) {
    (
        fixture("6.16+"),
        KernelOffsets::from_btf(&btf(160, 136, true)).unwrap(),
    )
}

/// `--keep-raw-tracepoints` on a kernel that preempts raw programs: the
/// default's raw plan, marked kept (its misses are then counted as lost
/// and nothing is handed over); without it, the raw plan with twin
/// programs on the slots that have a rescue program; on a kernel that
/// does not preempt them, the flag changes nothing.
#[test]
fn raw_tracepoints_are_kept_where_asked_on_a_preempting_kernel() {
    use crate::source::live::{attach::plan_for, LiveOptions};
    let (l, k) = kernel();
    let keep = LiveOptions {
        keep_raw: true,
        ..LiveOptions::default()
    };
    let preempts = || Some("preempts".to_string());
    let kept = plan_for(&keep, &l, Ok(k.clone()), preempts());
    let raw = plan(&l, &k, Tracepoints::Raw);
    assert!(kept.kept_raw);
    assert_eq!(
        (&kept.configs, &kept.decode),
        (&raw.configs, &raw.decode),
        "the default's raw plan"
    );
    assert!(kept.is_raw(Slot::Dequeue) && kept.is_raw(Slot::StatsLatency));
    assert!(Slot::ALL.iter().all(|&s| !kept.is_twinned(s)));
    let twins = plan_for(&LiveOptions::default(), &l, Ok(k.clone()), preempts());
    assert!(!twins.kept_raw && twins.twinned.as_deref() == Some("preempts"));
    for s in Slot::ALL {
        let rescued = rescue_program_name(s).is_some();
        assert_eq!(twins.is_twinned(s), rescued, "{s:?}");
        assert_eq!(twins.is_raw(s), raw.is_raw(s), "{s:?}");
        let mut c = twins.configs[s as usize];
        c.twin = 0;
        assert_eq!(c, raw.configs[s as usize], "otherwise the raw plan: {s:?}");
    }
    assert!(!calm_twinned(&l, &k));
    let calm = plan_for(&keep, &l, Ok(k.clone()), None);
    assert!(!calm.kept_raw);
    assert_eq!(calm, raw);
    // Without the kernel's BTF the flag cannot keep anything raw.
    let no_btf = plan_for(&keep, &l, Err("no BTF".into()), preempts());
    assert!(!no_btf.kept_raw && Slot::ALL.iter().all(|&s| !no_btf.is_raw(s)));
}

/// On a kernel that does not preempt raw programs, no twins.
fn calm_twinned(l: &Layout, k: &KernelOffsets) -> bool {
    use crate::source::live::{attach::plan_for, LiveOptions};
    let p = plan_for(&LiveOptions::default(), l, Ok(k.clone()), None);
    p.twinned.is_some() || Slot::ALL.iter().any(|&s| p.is_twinned(s))
}
