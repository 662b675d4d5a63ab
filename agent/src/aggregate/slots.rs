//! The aggregator's tables: a transport's slot (found or made), its peer's
//! and class's, and eviction of idle transports when the table is full.

use super::table::Entity;
use super::{Aggregator, Xprt};
use crate::enrich::classify::ClassMap;
use crate::model::{PeerKey, XprtKey};

impl Aggregator {
    pub(super) fn owners(&self, xi: u32) -> (u32, u32) {
        let x = self.xprts[xi as usize].as_ref().expect("live transport");
        (x.peer, x.class)
    }

    pub(super) fn xprt(&mut self, key: &XprtKey, ts: u64) -> u32 {
        if let Some(xi) = self.xprt_index.get(key, &self.xprts) {
            if let Some(x) = self.xprts[xi as usize].as_mut() {
                x.last_ns = ts;
            }
            return xi;
        }
        if self.xprt_index.len() >= self.xprt_next_scan_at {
            self.evict_transports(ts);
        }
        let peer_key = key.peer();
        let peer = self.peer_slot(&peer_key, ts);
        let class = self.peers.get(peer).class_slot;
        {
            let p = self.peers.get_mut(peer);
            p.members += 1;
            p.connections += 1;
        }
        self.classes.get_mut(class).connections += 1;
        let x = Xprt {
            key: *key,
            peer,
            class,
            queued: false,
            enqueued_ns: 0,
            dispatches: 0,
            last_ns: ts,
            kernel_class: None,
        };
        let xi = match self.xprt_free.pop() {
            Some(i) => {
                self.xprts[i as usize] = Some(x);
                i
            }
            None => {
                self.xprts.push(Some(x));
                (self.xprts.len() - 1) as u32
            }
        };
        self.xprt_index.insert(xi, &self.xprts);
        xi
    }

    pub(super) fn peer_slot(&mut self, key: &PeerKey, ts: u64) -> u32 {
        if let Some(s) = self.peers.slot_of(key) {
            return s;
        }
        if self.peers.is_full() {
            for gone in self.peers.evict_idle() {
                self.classes.get_mut(gone.class_slot).members -= 1;
            }
        }
        let class_slot = self.class_slot_for(key, None);
        let class = self.classes.get(class_slot).class.clone();
        self.classes.get_mut(class_slot).members += 1;
        let name = self.shown(key);
        let (slot, _) = self.peers.get_or_insert(key, || Entity {
            name,
            class,
            netns: key.netns,
            class_slot,
            last_active_ns: ts,
            ..Entity::default()
        });
        slot
    }

    pub(super) fn class_slot_for(&mut self, peer: &PeerKey, kernel_class: Option<u32>) -> u32 {
        let shown = self.shown(peer);
        let a = match kernel_class {
            Some(word) => ClassMap::kernel_class(word, &shown),
            None => self.classmap.classify_as(peer, &shown),
        };
        if let Some(s) = self.classes.slot_of(&a.entity) {
            return s;
        }
        if self.classes.is_full() {
            self.classes.evict_idle();
        }
        let ts = self.last_ts;
        self.classes
            .get_or_insert(&a.entity, || Entity {
                name: a.entity.clone(),
                class: a.class.clone(),
                netns: peer.netns,
                last_active_ns: ts,
                ..Entity::default()
            })
            .0
    }

    pub(super) fn evict_transports(&mut self, ts: u64) {
        let mut idle: Vec<(u64, u32)> = self
            .xprts
            .iter()
            .enumerate()
            .filter_map(|(i, x)| {
                x.as_ref()
                    .filter(|x| !x.queued)
                    .map(|x| (x.last_ns, i as u32))
            })
            .collect();
        let cap = self.limits.max_transports;
        let n = (cap / 8).max(1).min(idle.len());
        self.xprt_next_scan_at = cap.max(self.xprt_index.len() - n + cap / 8);
        if n == 0 {
            return;
        }
        idle.select_nth_unstable(n - 1);
        for &(_, xi) in &idle[..n] {
            self.remove_xprt(xi, ts);
            self.transports_evicted += 1;
        }
    }

    pub(super) fn remove_xprt(&mut self, xi: u32, ts: u64) {
        let Some(x) = self.xprts[xi as usize].as_ref() else {
            return;
        };
        if x.queued {
            self.unqueue(xi, ts);
        }
        self.xprt_index.remove(xi, &self.xprts);
        let x = self.xprts[xi as usize].take().expect("checked above");
        self.xprt_free.push(xi);
        let p = self.peers.get_mut(x.peer);
        p.members -= 1;
        p.connections -= 1;
        p.last_active_ns = ts;
        self.classes.get_mut(x.class).connections -= 1;
    }
}
