//! Incremental detokenizer for streaming: emits only complete UTF-8 characters and
//! holds back a split multibyte sequence until the rest arrives.

#[derive(Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
}

impl StreamDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a token's bytes; returns the text that is now complete.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) => {
                match e.error_len() {
                    // An invalid sequence (not just incomplete): emit it replaced.
                    Some(_) => self.pending.len(),
                    None => e.valid_up_to(),
                }
            }
        };
        let out: Vec<u8> = self.pending.drain(..valid).collect();
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Whatever is left at the end of the stream (incomplete bytes are replaced).
    pub fn flush(&mut self) -> String {
        let out = std::mem::take(&mut self.pending);
        String::from_utf8_lossy(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_back_split_characters() {
        let mut d = StreamDecoder::new();
        let s = "é🦙".as_bytes();
        assert_eq!(d.push(&s[..1]), "");
        assert_eq!(d.push(&s[1..3]), "é");
        assert_eq!(d.push(&s[3..5]), "");
        assert_eq!(d.push(&s[5..]), "🦙");
        assert_eq!(d.flush(), "");
    }

    #[test]
    fn invalid_bytes_are_replaced_not_stuck() {
        let mut d = StreamDecoder::new();
        assert_eq!(d.push(&[0xff, b'a']), "\u{fffd}a");
        assert_eq!(d.push(&[0xe6]), "");
        assert_eq!(d.flush(), "\u{fffd}");
    }
}
