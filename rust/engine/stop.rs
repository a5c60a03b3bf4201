//! Stop strings over streamed text: a full match ends generation (the text is cut
//! before it); a partial match at the end is held back until it resolves.

pub struct StopMatcher {
    stops: Vec<String>,
}

pub enum StopCheck {
    /// Text up to this byte offset may be sent.
    SafeUpTo(usize),
    /// A stop string matched at this byte offset.
    Matched { at: usize, word: String },
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> StopMatcher {
        StopMatcher { stops: stops.into_iter().filter(|s| !s.is_empty()).collect() }
    }

    /// Check `text`, of which the bytes before `from` were already checked and sent.
    pub fn check(&self, text: &str, from: usize) -> StopCheck {
        let longest = self.stops.iter().map(|s| s.len()).max().unwrap_or(0);
        let mut search_from = from.saturating_sub(longest);
        while !text.is_char_boundary(search_from) {
            search_from -= 1;
        }
        let mut best: Option<(usize, &String)> = None;
        for s in &self.stops {
            if let Some(p) = text[search_from..].find(s.as_str()) {
                let at = search_from + p;
                if best.map(|(b, _)| at < b).unwrap_or(true) {
                    best = Some((at, s));
                }
            }
        }
        if let Some((at, w)) = best {
            return StopCheck::Matched { at, word: w.clone() };
        }
        // Hold back the longest suffix that is a prefix of some stop string.
        let mut hold = 0;
        for s in &self.stops {
            for l in (1..s.len().min(text.len()) + 1).rev() {
                if l <= hold {
                    break;
                }
                if text.is_char_boundary(text.len() - l) && s.is_char_boundary(l) && text.ends_with(&s[..l]) {
                    hold = l;
                    break;
                }
            }
        }
        StopCheck::SafeUpTo((text.len() - hold).max(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_partial_and_cuts_full() {
        let m = StopMatcher::new(vec!["\n\n".into(), "END".into()]);
        assert!(matches!(m.check("abc\n", 0), StopCheck::SafeUpTo(3)));
        assert!(matches!(m.check("abc\nx", 3), StopCheck::SafeUpTo(5)));
        match m.check("abc\n\nmore", 3) {
            StopCheck::Matched { at, word } => {
                assert_eq!(at, 3);
                assert_eq!(word, "\n\n");
            }
            _ => panic!("expected a match"),
        }
        assert!(matches!(m.check("xxEN", 0), StopCheck::SafeUpTo(2)));
    }
}
