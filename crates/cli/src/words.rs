//! How a count is said to a person: "1 message", "2 messages", "0 deliveries", never
//! "1 message(s)". Every count the command line and its console show goes through [`counted`].

use std::borrow::Cow;
use std::fmt::Display;

/// `n` and its noun, singular for exactly one and plural otherwise (zero included):
/// `counted(1, "message")` is "1 message", `counted(3, "delivery")` "3 deliveries".
pub fn counted<N>(n: N, noun: &str) -> String
where
    N: Copy + Display + TryInto<u64>,
{
    if n.try_into().ok() == Some(1) {
        format!("{n} {noun}")
    } else {
        format!("{n} {}", plural(noun))
    }
}

/// The plural of a noun the command line counts: a consonant's `y` becomes `ies` (delivery,
/// entry, copy), a hiss takes `es` (crash, box), any other noun `s`.
pub fn plural(noun: &str) -> Cow<'_, str> {
    if let Some(stem) = noun.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return Cow::Owned(format!("{stem}ies"));
    }
    if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|end| noun.ends_with(end))
    {
        return Cow::Owned(format!("{noun}es"));
    }
    Cow::Owned(format!("{noun}s"))
}

#[cfg(test)]
mod tests {
    use super::{counted, plural};

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1_u64, "message"), "1 message");
        assert_eq!(counted(0_usize, "message"), "0 messages");
        assert_eq!(counted(2_u32, "message"), "2 messages");
        assert_eq!(counted(1_usize, "delivery"), "1 delivery");
        assert_eq!(counted(7_u64, "delivery"), "7 deliveries");
        assert_eq!(counted(2_i64, "entry"), "2 entries");
        // A count that is no u64 (negative) is never "one".
        assert_eq!(counted(-1_i64, "event"), "-1 events");
    }

    #[test]
    fn the_nouns_counted_take_their_plurals() {
        for (one, many) in [
            ("action", "actions"),
            ("event", "events"),
            ("invoice", "invoices"),
            ("fact", "facts"),
            ("record", "records"),
            ("delivery", "deliveries"),
            ("copy", "copies"),
            ("reply", "replies"),
            ("crash", "crashes"),
            ("day", "days"),
            ("key", "keys"),
            ("time", "times"),
        ] {
            assert_eq!(plural(one), many);
        }
    }
}
