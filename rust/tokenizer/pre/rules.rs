//! One regex of a pre-tokenizer preset, hand-written: `match_at` answers "does the
//! regex match at position p, and where does the match end", with the semantics
//! of llama.cpp's splitters (unicode.cpp): the custom GPT-2 / Llama-3 splitters,
//! and for the other patterns `std::regex` (leftmost, first alternative wins,
//! greedy with backtracking) over a chunk whose ends act as the text's ends.
use super::unicode::{wide, Flags, LETTER, MARK, NUMBER, PUNCT, SPACE, SYMBOL};

/// The codepoints of a text fragment and their flags.
pub struct Cps {
    pub c: Vec<char>,
    pub f: Vec<Flags>,
}

/// A character class, as one regex bracket expression or `\p{..}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `\p{L}`
    Letter,
    /// `\p{N}`
    Number,
    /// `\p{P}`
    Punct,
    /// `[0-9]`
    Digit,
    /// `[\r\n]`
    CrLf,
    /// `[\p{P}\$\+<=>\^~\|]` (the default preset)
    PunctSym,
    /// `[\p{P}\$\+<=>\^~\|`]` (falcon)
    PunctSymTick,
    /// deepseek-llm's cased-letter list `[A-Za-zµÀ-ÖØ-ö…𞤀-𞥃]`
    DsLetters,
    /// deepseek-llm's `[!-/:-~！-／：-～‘-‟　-。]`
    DsPunct,
    /// `[一-龥ࠀ-一가-퟿]` (deepseek-llm, deepseek-coder)
    Cjk,
    /// `[一-龥぀-ゟ゠-ヿ]` (deepseek-v3)
    CjkKana,
    /// `[^(\s|.,!?…。，、।۔،)]` (bloom)
    NotBloomStop,
}

/// deepseek-llm's letter ranges (inclusive), decoded from llama-vocab.cpp.
const DS_LETTERS: &[(u32, u32)] = &[
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA), (0x1BC, 0x1BF),
    (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377), (0x37B, 0x37D), (0x37F, 0x37F),
    (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481),
    (0x48A, 0x52F), (0x531, 0x556), (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA),
    (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D),
    (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC),
    (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102),
    (0x2107, 0x2107), (0x210A, 0x2113), (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126),
    (0x2128, 0x2128), (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF3),
    (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF),
    (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F),
    (0x104B0, 0x104D3), (0x104D8, 0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF),
    (0x1E900, 0x1E943),
];

fn in_ranges(c: u32, ranges: &[(u32, u32)]) -> bool {
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

impl Class {
    pub fn has(self, c: char, f: Flags) -> bool {
        // Classes written without \p{..} run through llama.cpp's std::wregex path,
        // which sees non-ASCII whitespace as U+000B.
        let w = wide(c, f) as u32;
        match self {
            Class::Letter => f & LETTER != 0,
            Class::Number => f & NUMBER != 0,
            Class::Punct => f & PUNCT != 0,
            Class::Digit => (0x30..=0x39).contains(&w),
            Class::CrLf => w == 0x0A || w == 0x0D,
            Class::PunctSym => f & PUNCT != 0 || matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|'),
            Class::PunctSymTick => f & PUNCT != 0 || matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|' | '`'),
            Class::DsLetters => in_ranges(w, DS_LETTERS),
            Class::DsPunct => matches!(w, 0x21..=0x2F | 0x3A..=0x7E | 0xFF01..=0xFF0F | 0xFF1A..=0xFF5E | 0x2018..=0x201F | 0x3000..=0x3002),
            // 一-龥 ∪ ࠀ-一 ∪ 가-퟿
            Class::Cjk => matches!(w, 0x0800..=0x9FA5 | 0xAC00..=0xD7FF),
            Class::CjkKana => matches!(w, 0x4E00..=0x9FA5 | 0x3040..=0x309F | 0x30A0..=0x30FF),
            Class::NotBloomStop => {
                f & SPACE == 0
                    && !matches!(
                        w,
                        0x28 | 0x29 | 0x7C | 0x2E | 0x2C | 0x21 | 0x3F | 0x2026 | 0x3002 | 0xFF0C | 0x3001 | 0x0964 | 0x06D4 | 0x060C
                    )
            }
        }
    }
}

/// What may stand before a class run: nothing, `\s?` or ` ?`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lead {
    None,
    OptSpace,
    OptWhite,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
    /// (llama.cpp's unicode_regex_split_custom_gpt2)
    Gpt2,
    /// `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}|
    /// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+` — Llama 3 (digits 3), Qwen2 (digits 1);
    /// `marks` adds \p{M} to the letter runs (Qwen3.5), `!nl_tail` drops the `[\r\n]*` (seed-coder).
    Llama3 { digits: usize, marks: bool, nl_tail: bool },
    /// `lead class{min,max}`
    Run { lead: Lead, class: Class, min: usize, max: usize },
    /// `\s+$`
    TrailingWhite,
    /// deepseek-v3's `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
    /// ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    Deepseek3,
    /// GPT-4o / o200k (gpt-oss, Llama 4) and Tekken (Mistral NeMo, Ministral), as llama.cpp's
    /// regexes run them: `[^\r\n\p{L}\p{N}]?U*L+C?|[^\r\n\p{L}\p{N}]?U+L*C?|\p{N}{1,digits}|
    /// ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+` with U a letter not in a-z, L a
    /// letter not in A-Z (a letter outside ASCII is both) and C, with `contractions`, one of
    /// `'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d` (any case).
    CaseRuns { contractions: bool, digits: usize },
}

/// A chunk of `Cps` being matched: positions at or past `end` are outside it.
struct View<'a> {
    t: &'a Cps,
    end: usize,
}

impl View<'_> {
    fn c(&self, i: usize) -> Option<char> {
        if i < self.end {
            Some(self.t.c[i])
        } else {
            None
        }
    }
    /// Flags of position i; None outside the chunk.
    fn f(&self, i: usize) -> Option<Flags> {
        if i < self.end {
            Some(self.t.f[i])
        } else {
            None
        }
    }
    fn is(&self, i: usize, bits: Flags) -> bool {
        self.f(i).is_some_and(|f| f & bits != 0)
    }
    fn class(&self, i: usize, k: Class) -> bool {
        i < self.end && k.has(self.t.c[i], self.t.f[i])
    }
    fn run(&self, mut i: usize, pred: impl Fn(usize) -> bool) -> usize {
        while i < self.end && pred(i) {
            i += 1;
        }
        i
    }
    fn is_crlf(&self, i: usize) -> bool {
        matches!(self.c(i), Some('\r' | '\n'))
    }
    /// `'s|'t|'re|'ve|'m|'ll|'d` at p (ASCII, optionally case-insensitive).
    fn contraction(&self, p: usize, fold: bool) -> Option<usize> {
        if self.c(p) != Some('\'') || p + 1 >= self.end {
            return None;
        }
        let low = |i: usize| self.c(i).map(|c| if fold { c.to_ascii_lowercase() } else { c });
        if matches!(low(p + 1), Some('s' | 't' | 'm' | 'd')) {
            return Some(p + 2);
        }
        if p + 2 < self.end {
            if let (Some(a), Some(b)) = (low(p + 1), low(p + 2)) {
                if matches!((a, b), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                    return Some(p + 3);
                }
            }
        }
        None
    }
    /// The whitespace tail shared by the Llama-3-style patterns, at p:
    /// `\s*[\r\n]+|\s+(?!\S)|\s+`. None when p is not whitespace.
    fn white_tail(&self, p: usize, crlf: bool) -> Option<usize> {
        let end_ws = self.run(p, |i| self.is(i, SPACE));
        if end_ws == p {
            return None;
        }
        if crlf {
            // \s*[\r\n]+ ends after the last CR/LF of the whitespace run
            if let Some(last) = (p..end_ws).rev().find(|&i| self.is_crlf(i)) {
                return Some(last + 1);
            }
        }
        if end_ws - p > 1 && end_ws < self.end {
            return Some(end_ws - 1); // \s+(?!\S): leave the last one for the next word
        }
        Some(end_ws)
    }
}

impl Rule {
    /// Ok(end): the regex matches `[p, end)`, end > p. Err(q): no match starts in `[p, q)`.
    pub fn match_at(&self, t: &Cps, p: usize, end: usize) -> Result<usize, usize> {
        let v = View { t, end };
        let found = match *self {
            Rule::Gpt2 => Some(gpt2(&v, p)),
            Rule::Llama3 { digits, marks, nl_tail } => Some(llama3(&v, p, digits, marks, nl_tail)),
            Rule::Run { lead, class, min, max } => run_rule(&v, p, lead, class, min, max),
            Rule::Deepseek3 => deepseek3(&v, p),
            Rule::CaseRuns { contractions, digits } => Some(case_runs(&v, p, contractions, digits)),
            Rule::TrailingWhite => {
                let q = v.run(p, |i| v.is(i, SPACE));
                return if q == p {
                    Err(p + 1)
                } else if q == end {
                    Ok(q)
                } else {
                    Err(q) // every start inside this run sees the same non-final end
                };
            }
        };
        found.ok_or(p + 1)
    }
}

/// llama.cpp unicode_regex_split_custom_gpt2, one match.
fn gpt2(v: &View, p: usize) -> usize {
    if let Some(q) = v.contraction(p, false) {
        return q;
    }
    let c = v.c(p);
    let s = if c == Some(' ') { p + 1 } else { p };
    if v.is(s, LETTER) {
        return v.run(s, |i| v.is(i, LETTER));
    }
    if v.is(s, NUMBER) {
        return v.run(s, |i| v.is(i, NUMBER));
    }
    let other = |i: usize| v.f(i).is_some_and(|f| f & (SPACE | LETTER | NUMBER) == 0);
    if other(s) {
        return v.run(s, other);
    }
    let end_ws = v.run(p, |i| v.is(i, SPACE));
    let n = end_ws - p;
    if n > 1 && end_ws < v.end {
        return end_ws - 1;
    }
    if n > 0 {
        return end_ws;
    }
    p + 1
}

/// llama.cpp unicode_regex_split_custom_llama3 (and the Qwen2 pattern it generalises).
fn llama3(v: &View, p: usize, digits: usize, marks: bool, nl_tail: bool) -> usize {
    if let Some(q) = v.contraction(p, true) {
        return q;
    }
    let word = if marks { LETTER | MARK } else { LETTER };
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if !v.is_crlf(p) && !v.is(p, NUMBER) && (v.is(p, word) || v.is(p + 1, word)) {
        return v.run(p + 1, |i| v.is(i, word));
    }
    // \p{N}{1,digits}
    if v.is(p, NUMBER) {
        let mut q = p;
        while q - p < digits && v.is(q, NUMBER) {
            q += 1;
        }
        return q;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    let s = if v.c(p) == Some(' ') { p + 1 } else { p };
    let other = |i: usize| v.f(i).is_some_and(|f| f & (SPACE | word | NUMBER) == 0);
    if other(s) {
        let q = v.run(s, other);
        return if nl_tail { v.run(q, |i| v.is_crlf(i)) } else { q };
    }
    v.white_tail(p, true).unwrap_or(p + 1)
}

fn run_rule(v: &View, p: usize, lead: Lead, class: Class, min: usize, max: usize) -> Option<usize> {
    let count = |s: usize| {
        let mut q = s;
        while q - s < max && v.class(q, class) {
            q += 1;
        }
        q - s
    };
    let led = match lead {
        Lead::None => false,
        Lead::OptSpace => v.c(p) == Some(' '),
        Lead::OptWhite => v.is(p, SPACE),
    };
    if led {
        // greedy: first with the optional lead, then without it
        let n = count(p + 1);
        if n >= min && n > 0 {
            return Some(p + 1 + n);
        }
    }
    let n = count(p);
    if n >= min && n > 0 {
        Some(p + n)
    } else {
        None
    }
}

/// deepseek-v3's main pattern, through llama.cpp's collapsed-category regex.
fn deepseek3(v: &View, p: usize) -> Option<usize> {
    let c = v.c(p)?;
    // (llama.cpp's collapsed \p{S} covers ASCII `$+<=>^`|~`, i.e. the Unicode S chars)
    let ascii_alpha = |i: usize| v.c(i).is_some_and(|c| c.is_ascii_alphabetic());
    // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
    if c.is_ascii_punctuation() && ascii_alpha(p + 1) {
        return Some(v.run(p + 1, ascii_alpha));
    }
    let punct_sym = |i: usize| v.is(i, PUNCT | SYMBOL);
    let word = |i: usize| v.is(i, LETTER | MARK);
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    let lead_ok = !v.is_crlf(p) && !v.is(p, LETTER) && !punct_sym(p);
    if lead_ok && word(p + 1) {
        return Some(v.run(p + 1, word));
    }
    if word(p) {
        return Some(v.run(p, word));
    }
    // ' ?[\p{P}\p{S}]+[\r\n]*'
    let s = if c == ' ' && punct_sym(p + 1) { p + 1 } else { p };
    if punct_sym(s) {
        let q = v.run(s, punct_sym);
        return Some(v.run(q, |i| v.is_crlf(i)));
    }
    v.white_tail(p, true)
}

/// The GPT-4o / Tekken pattern, one match (see [`Rule::CaseRuns`]): a backtracking regex
/// engine's first alternative that matches, with its greedy choices.
fn case_runs(v: &View, p: usize, contractions: bool, digits: usize) -> usize {
    let letter = |i: usize| v.is(i, LETTER);
    let upper = |i: usize| letter(i) && !v.c(i).is_some_and(|c| c.is_ascii_lowercase());
    let lower = |i: usize| letter(i) && !v.c(i).is_some_and(|c| c.is_ascii_uppercase());
    // [^\r\n\p{L}\p{N}]? then a letter: the optional lead is taken whenever a letter follows
    let q = if letter(p) {
        Some(p)
    } else if !v.is_crlf(p) && !v.is(p, NUMBER) && v.c(p).is_some() && letter(p + 1) {
        Some(p + 1)
    } else {
        None
    };
    if let Some(q) = q {
        let u_end = v.run(q, upper);
        // U*L+: the longest U* after which an L+ starts (U* backtracks one at a time)
        let word_end = (q..=u_end).rev().find(|&k| lower(k)).map(|k| v.run(k, lower)).unwrap_or(
            // U+L*: q is a letter, so when no L follows any U prefix, q is in U
            v.run(u_end, lower),
        );
        return if contractions { v.contraction(word_end, true).unwrap_or(word_end) } else { word_end };
    }
    // \p{N}{1,digits}
    if v.is(p, NUMBER) {
        let mut e = p;
        while e - p < digits && v.is(e, NUMBER) {
            e += 1;
        }
        return e;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
    let s = if v.c(p) == Some(' ') { p + 1 } else { p };
    let other = |i: usize| v.f(i).is_some_and(|f| f & (SPACE | LETTER | NUMBER) == 0);
    if other(s) {
        let e = v.run(s, other);
        return v.run(e, |i| v.is_crlf(i) || v.c(i) == Some('/'));
    }
    v.white_tail(p, true).unwrap_or(p + 1)
}
