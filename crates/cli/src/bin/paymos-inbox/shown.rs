//! Every human-readable line the command line writes goes through [`shown`] (the `say!` and
//! `tell!` macros): an id, an order or a reason is what a sender or a person typed, and a
//! control character in it (a terminal escape that erases and rewrites the lines above, a
//! carriage return, a bidirectional override) must reach the operator's terminal as text, never
//! as a command. JSON lines need nothing more (serde escapes every control character), and the
//! raw bytes `exceptions --body` writes are not a line of ours.

use std::borrow::Cow;

/// `text` with every control character but the line's own newlines and tabs written as
/// `\u{…}` (C0, DEL, C1, and the bidirectional controls that reorder what a terminal shows).
pub fn shown(text: &str) -> Cow<'_, str> {
    let hidden = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn terminal_escapes_and_reordering_controls_are_written_as_text() {
        let evil = "order o-1\u{1b}[2K\u{1b}[1A\r\u{7}\u{9b}31m\u{202e}txt.exe";
        let said = shown(evil);
        assert_eq!(
            said,
            "order o-1\\u{1b}[2K\\u{1b}[1A\\u{d}\\u{7}\\u{9b}31m\\u{202e}txt.exe"
        );
        assert!(!said.chars().any(|c| c.is_control()));
        // A line's own layout is kept, and plain text is not copied.
        assert_eq!(shown("inv_1: held\n\tbecause"), "inv_1: held\n\tbecause");
        assert!(matches!(
            shown("inv_1 · 10.00 USDT"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
