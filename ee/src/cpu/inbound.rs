//! The CPU engine's inbound side: events the user sets, and the triggers
//! of triggered posts waiting for them, matched first come, first served.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ferrocoll_core::{Error, Event, EventType, Result};

use crate::queue::CAPACITY;

/// What a triggered post waits for: an event of this type, with this tag
/// unless the tag is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Filter(pub(crate) Event);

impl Filter {
    fn matches(&self, ev: &Event) -> bool {
        self.0.ev_type == ev.ev_type && (self.0.request == 0 || self.0.request == ev.request)
    }
}

impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.request {
            0 => write!(f, "a {} event", self.0.ev_type),
            tag => write!(f, "a {} event with tag {tag}", self.0.ev_type),
        }
    }
}

struct Waiter {
    id: u64,
    filter: Filter,
    fired: Arc<AtomicBool>,
}

/// Events set and not yet consumed, and triggers armed and not yet fired.
/// At most one of the two holds something that matches the other: a new
/// event goes to the oldest matching trigger, a new trigger takes the
/// oldest matching event.
#[derive(Default)]
pub(crate) struct Inbound {
    events: VecDeque<Event>,
    waiting: VecDeque<Waiter>,
    next_id: u64,
}

impl Inbound {
    /// The user sets `ev`: it fires the oldest trigger waiting for it, or waits for one.
    pub(crate) fn set(&mut self, ev: Event) -> Result<()> {
        if ev.ev_type == EventType::Overflow {
            return Err(Error::invalid_param(format!("{ev} is produced by engines; the user cannot set it")));
        }
        if let Some(i) = self.waiting.iter().position(|w| w.filter.matches(&ev)) {
            if let Some(w) = self.waiting.remove(i) {
                // Release: pairs with the trigger's Acquire load; nothing else is published.
                w.fired.store(true, Ordering::Release);
            }
            return Ok(());
        }
        if self.events.len() >= CAPACITY {
            return Err(Error::no_resource(format!(
                "cannot set {ev}: {CAPACITY} events are set and no triggered post has taken them"
            )));
        }
        self.events.push_back(ev);
        Ok(())
    }

    /// Arm a trigger: returns its id and its flag, already set when an event
    /// was waiting for it.
    pub(crate) fn arm(&mut self, filter: Filter) -> Result<(u64, Arc<AtomicBool>)> {
        if filter.0.ev_type == EventType::Overflow {
            return Err(Error::invalid_param(format!(
                "{} cannot trigger a collective: the user cannot set it",
                filter.0.ev_type
            )));
        }
        self.next_id += 1;
        let id = self.next_id;
        if let Some(i) = self.events.iter().position(|e| filter.matches(e)) {
            self.events.remove(i);
            return Ok((id, Arc::new(AtomicBool::new(true))));
        }
        let fired = Arc::new(AtomicBool::new(false));
        self.waiting.push_back(Waiter { id, filter, fired: fired.clone() });
        Ok((id, fired))
    }

    /// A trigger goes away (its collective ended or was dropped): if it had
    /// not fired, it no longer takes an event.
    pub(crate) fn disarm(&mut self, id: u64) {
        self.waiting.retain(|w| w.id != id);
    }

    /// Events set and not taken yet.
    pub(crate) fn pending(&self) -> usize {
        self.events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(tag: u64) -> Event {
        Event::with_request(EventType::ComputeComplete, tag)
    }

    fn fired(f: &Arc<AtomicBool>) -> bool {
        f.load(Ordering::Acquire)
    }

    #[test]
    fn first_armed_first_fired() {
        let mut inb = Inbound::default();
        let (_, a) = inb.arm(Filter(cc(0))).unwrap();
        let (_, b) = inb.arm(Filter(cc(0))).unwrap();
        inb.set(cc(0)).unwrap();
        assert!(fired(&a) && !fired(&b));
        inb.set(cc(0)).unwrap();
        assert!(fired(&b));
        assert_eq!(inb.pending(), 0);
    }

    #[test]
    fn events_set_before_arming_wait_in_order() {
        let mut inb = Inbound::default();
        inb.set(cc(1)).unwrap();
        inb.set(cc(2)).unwrap();
        let (_, t2) = inb.arm(Filter(cc(2))).unwrap();
        assert!(fired(&t2));
        assert_eq!(inb.pending(), 1);
        let (_, any) = inb.arm(Filter(cc(0))).unwrap();
        assert!(fired(&any));
        assert_eq!(inb.pending(), 0);
    }

    #[test]
    fn tags_and_types_select() {
        let mut inb = Inbound::default();
        let (_, t5) = inb.arm(Filter(cc(5))).unwrap();
        let (_, post) = inb.arm(Filter(Event::new(EventType::CollectivePost))).unwrap();
        inb.set(cc(4)).unwrap();
        assert!(!fired(&t5) && !fired(&post));
        inb.set(Event::new(EventType::CollectivePost)).unwrap();
        assert!(fired(&post) && !fired(&t5));
        inb.set(cc(5)).unwrap();
        assert!(fired(&t5));
        assert_eq!(inb.pending(), 1);
    }

    #[test]
    fn a_disarmed_trigger_takes_nothing() {
        let mut inb = Inbound::default();
        let (id, t) = inb.arm(Filter(cc(0))).unwrap();
        inb.disarm(id);
        inb.set(cc(0)).unwrap();
        assert!(!fired(&t));
        assert_eq!(inb.pending(), 1);
    }

    #[test]
    fn overflow_is_refused_and_capacity_is_bounded() {
        let mut inb = Inbound::default();
        let ov = Event::new(EventType::Overflow);
        assert!(inb.set(ov).unwrap_err().context().contains("Overflow"));
        assert!(inb.arm(Filter(ov)).unwrap_err().context().contains("Overflow"));
        for _ in 0..CAPACITY {
            inb.set(cc(0)).unwrap();
        }
        let e = inb.set(cc(0)).unwrap_err();
        assert!(e.context().contains(&CAPACITY.to_string()), "{e}");
    }
}
