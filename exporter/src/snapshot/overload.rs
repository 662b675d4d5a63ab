//! Saying no: the 503s of a view past the response budget or past the
//! views encoded per snapshot, and the bound on the requests waiting for
//! the large lane.

use std::sync::{Arc, Mutex};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;

use super::{View, MAX_LARGE_VIEWS, MAX_SHARED_VIEWS, SMALL_VIEW};
use crate::body_budget::{OverBudget, MIB};
use crate::json_error::json_error;

/// A request waiting for the large lane, counted with the others of its
/// view while it waits (also when its client hangs up meanwhile). At most
/// [`MAX_LARGE_VIEWS`] distinct views wait: more would wait for ever (the
/// lane makes fewer a second than a snapshot admits); any number of
/// requests for one of them may, as they will share its encoding.
pub(super) struct Waiting {
    views: Arc<Mutex<Vec<(View, usize)>>>,
    view: View,
}

impl Waiting {
    pub(super) fn on(views: &Arc<Mutex<Vec<(View, usize)>>>, view: View) -> Option<Waiting> {
        let mut w = views.lock().unwrap_or_else(|p| p.into_inner());
        match w.iter().position(|(v, _)| *v == view) {
            Some(i) => w[i].1 += 1,
            None if w.len() >= MAX_LARGE_VIEWS => return None,
            None => w.push((view, 1)),
        }
        Some(Waiting {
            views: views.clone(),
            view,
        })
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut w = self.views.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = w.iter().position(|(v, _)| *v == self.view) {
            w[i].1 -= 1;
            if w[i].1 == 0 {
                w.remove(i);
            }
        }
    }
}

/// The 503 of a view that does not fit in the budget: what is full, and
/// what to do.
pub fn busy(o: OverBudget) -> Response {
    let mib = |b: usize| b.div_ceil(MIB);
    let mut r = json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "too many snapshot responses held at once: the JSON not yet read by their \
clients holds {} MiB of the {} MiB response budget and this one needs about {} MiB more; \
try again shortly, ask for less (top=N, group=peer|class), or raise \
[http] response_memory_mib",
            mib(o.used),
            mib(o.limit),
            mib(o.needed)
        ),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    r
}

/// The 503 of one distinct view too many in an interval: the agent is
/// overloaded by clients asking for many views, and what to do.
pub fn too_many_views(bound: &str) -> Response {
    let mut r = json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        too_many_views_message(bound),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// What the agent says of a view past `bound` (the views it encodes
/// per snapshot).
pub fn too_many_views_message(bound: &str) -> String {
    format!(
        "nfsdtopd is overloaded: it encodes at most {bound} per snapshot, and this one \
is past them; try again at the next interval, or ask for a view others ask for (the full \
snapshot, a common top=N)"
    )
}

/// The bound on the snapshot views, in words.
pub fn views_bound() -> String {
    format!(
        "{MAX_SHARED_VIEWS} distinct views (group, top), {MAX_LARGE_VIEWS} of them of more than \
{SMALL_VIEW} entities besides the full one"
    )
}
