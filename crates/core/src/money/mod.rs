//! The money rules, stated once: what an event asks of the resource it names ([`change`]), the
//! state machines ([`status`]), an invoice's own record ([`invoice`]), every write of money with
//! its guard ([`write`]), what a store's report means ([`outcome`]), the merchant's fulfilment
//! ([`effect`]) and the records as the domain reads them ([`record`]). Every road below
//! reads these; these import no road.

pub mod action;
pub mod change;
pub mod effect;
pub mod invoice;
pub mod outcome;
pub mod record;
pub mod status;
pub mod write;
