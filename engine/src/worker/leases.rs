//! The leases a worker holds (docs/DESIGN.md §4): how many steps of each batch are still in
//! flight, which leases the renewer keeps alive, and which the next flush may drop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

/// The leases this worker holds, with how many of each one's steps are still in flight.
#[derive(Clone, Default)]
pub(super) struct Leases(Arc<Mutex<LeaseBook>>);

#[derive(Default)]
struct LeaseBook {
    outstanding: HashMap<Uuid, usize>,
    /// Leases whose every step has been concluded: dropped by the next flush.
    done: Vec<Uuid>,
}

impl Leases {
    pub(super) fn open(&self, lease: Uuid, steps: usize) {
        let mut book = self.0.lock().expect("not poisoned");
        if steps == 0 {
            book.done.push(lease);
        } else {
            book.outstanding.insert(lease, steps);
        }
    }

    pub(super) fn finish(&self, lease: Uuid) {
        let mut book = self.0.lock().expect("not poisoned");
        if let Some(left) = book.outstanding.get_mut(&lease) {
            *left -= 1;
            if *left == 0 {
                book.outstanding.remove(&lease);
                book.done.push(lease);
            }
        }
    }

    pub(super) fn live(&self) -> Vec<Uuid> {
        let book = self.0.lock().expect("not poisoned");
        book.outstanding.keys().copied().collect()
    }

    /// The leases to drop now.
    pub(super) fn take_done(&self) -> Vec<Uuid> {
        std::mem::take(&mut self.0.lock().expect("not poisoned").done)
    }
}
