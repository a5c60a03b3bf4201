//! Per-codepoint properties the pre-tokenizer regexes ask about, as llama.cpp's
//! unicode.cpp defines them: the general category family (\p{L}, \p{N}, \p{P},
//! \p{S}, \p{M}) and `\s` = the Unicode White_Space property (llama.cpp's
//! `unicode_set_whitespace`, 25 codepoints).
use unicode_general_category::{get_general_category, GeneralCategory as G};

/// Category and whitespace bits of one codepoint.
pub type Flags = u8;
pub const LETTER: Flags = 1;
pub const NUMBER: Flags = 1 << 1;
pub const PUNCT: Flags = 1 << 2;
pub const SYMBOL: Flags = 1 << 3;
pub const MARK: Flags = 1 << 4;
pub const SPACE: Flags = 1 << 5;

/// White_Space (PropList.txt); the same 25 codepoints as llama.cpp's table.
fn is_white_space(c: char) -> bool {
    matches!(
        c as u32,
        0x09..=0x0D | 0x20 | 0x85 | 0xA0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000
    )
}

fn category_bits(c: char) -> Flags {
    match get_general_category(c) {
        G::UppercaseLetter | G::LowercaseLetter | G::TitlecaseLetter | G::ModifierLetter | G::OtherLetter => LETTER,
        G::DecimalNumber | G::LetterNumber | G::OtherNumber => NUMBER,
        G::ConnectorPunctuation
        | G::DashPunctuation
        | G::OpenPunctuation
        | G::ClosePunctuation
        | G::InitialPunctuation
        | G::FinalPunctuation
        | G::OtherPunctuation => PUNCT,
        G::MathSymbol | G::CurrencySymbol | G::ModifierSymbol | G::OtherSymbol => SYMBOL,
        G::NonspacingMark | G::SpacingMark | G::EnclosingMark => MARK,
        // separators, controls, format, private use, surrogates, unassigned
        _ => 0,
    }
}

const fn ascii_table() -> [Flags; 128] {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        t[i] = if b.is_ascii_alphabetic() {
            LETTER
        } else if b.is_ascii_digit() {
            NUMBER
        } else if matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ') {
            SPACE
        } else if matches!(b, b'$' | b'+' | b'<' | b'=' | b'>' | b'^' | b'`' | b'|' | b'~') {
            SYMBOL
        } else if b.is_ascii_punctuation() {
            PUNCT
        } else {
            0
        };
        i += 1;
    }
    t
}

static ASCII: [Flags; 128] = ascii_table();

pub fn flags(c: char) -> Flags {
    if c.is_ascii() {
        return ASCII[c as usize];
    }
    let ws = if is_white_space(c) { SPACE } else { 0 };
    category_bits(c) | ws
}

/// The character llama.cpp's `std::wregex` fallback sees: non-ASCII whitespace is
/// replaced by U+000B so that `\s` matches it (unicode.cpp, unicode_regex_split).
pub fn wide(c: char, f: Flags) -> char {
    if !c.is_ascii() && f & SPACE != 0 {
        '\u{0B}'
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories() {
        assert_eq!(flags('a'), LETTER);
        assert_eq!(flags('é'), LETTER);
        assert_eq!(flags('日'), LETTER);
        assert_eq!(flags('7'), NUMBER);
        assert_eq!(flags('٣'), NUMBER); // Arabic-Indic digit
        assert_eq!(flags('Ⅻ'), NUMBER); // Nl
        assert_eq!(flags('.'), PUNCT);
        assert_eq!(flags('«'), PUNCT);
        assert_eq!(flags('€'), SYMBOL);
        assert_eq!(flags('~'), SYMBOL);
        assert_eq!(flags('🦙'), SYMBOL);
        assert_eq!(flags('\u{301}'), MARK);
        assert_eq!(flags('\u{1c}'), 0); // ASCII control, not White_Space
        assert_eq!(flags('\u{200b}'), 0); // zero-width space is Cf, not White_Space
    }

    #[test]
    fn white_space_is_the_unicode_property() {
        for c in ['\t', '\n', '\u{0B}', '\u{0C}', '\r', ' ', '\u{85}', '\u{A0}', '\u{1680}', '\u{2000}', '\u{200A}', '\u{2028}', '\u{2029}', '\u{202F}', '\u{205F}', '\u{3000}'] {
            assert!(flags(c) & SPACE != 0, "{:?}", c);
        }
        let n = (0u32..0x11_0000).filter_map(char::from_u32).filter(|&c| flags(c) & SPACE != 0).count();
        assert_eq!(n, 25);
        assert_eq!(wide('\u{3000}', flags('\u{3000}')), '\u{0B}');
        assert_eq!(wide(' ', flags(' ')), ' ');
    }
}
