//! GBNF (llama.cpp's grammar format) → llguidance's Lark dialect. Rules `name ::= expr`
//! become `name: expr` (names lower-cased, `-` → `_`, `root` → `start`); quoted strings
//! keep their escapes; character classes and `.` become regex terminals; `* + ? {m,n}`,
//! grouping and alternation carry over. Comments (`#` to end of line) are dropped.

/// Convert a GBNF grammar. Errors name the line and what is wrong.
pub fn gbnf_to_lark(src: &str) -> Result<String, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut line = 1;
    let mut out = String::new();
    let mut names: Vec<(String, String)> = Vec::new();
    let mut rename = |n: &str| -> String {
        if let Some((_, r)) = names.iter().find(|(a, _)| a == n) {
            return r.clone();
        }
        let base = if n == "root" { "start".to_string() } else { format!("r_{}", n.to_ascii_lowercase().replace('-', "_")) };
        let mut r = base.clone();
        let mut k = 2;
        while names.iter().any(|(_, b)| *b == r) {
            r = format!("{base}_{k}");
            k += 1;
        }
        names.push((n.to_string(), r.clone()));
        r
    };
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let err = |line: usize, m: &str| Err(format!("grammar: line {line}: {m}"));
    let mut saw_rule = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                out.push('\n');
                i += 1;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' => {
                // decode GBNF's escapes (incl. \xHH, \uHHHH, \UHHHHHHHH), re-escape for Lark
                i += 1;
                let mut text = String::new();
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\n' {
                        return err(line, "unterminated string");
                    }
                    if chars[i] != '\\' {
                        text.push(chars[i]);
                        i += 1;
                        continue;
                    }
                    let (ch, used) = match unescape(&chars[i + 1..]) {
                        Ok(x) => x,
                        Err(m) => return err(line, &m),
                    };
                    text.push(ch);
                    i += 1 + used;
                }
                if i >= chars.len() {
                    return err(line, "unterminated string");
                }
                i += 1;
                out.push('"');
                for ch in text.chars() {
                    match ch {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            '[' => {
                let start = i;
                i += 1;
                if i < chars.len() && chars[i] == '^' {
                    i += 1;
                }
                while i < chars.len() && chars[i] != ']' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    if i < chars.len() && chars[i] == '\n' {
                        return err(line, "unterminated character class");
                    }
                    i += 1;
                }
                if i >= chars.len() {
                    return err(line, "unterminated character class");
                }
                i += 1;
                let class: String = chars[start..i].iter().collect();
                out.push('/');
                out.push_str(&class.replace('/', "\\/"));
                out.push('/');
            }
            '.' => {
                out.push_str("/(?s:.)/");
                i += 1;
            }
            ':' if chars.get(i + 1) == Some(&':') && chars.get(i + 2) == Some(&'=') => {
                while out.ends_with(' ') || out.ends_with('\t') {
                    out.pop();
                }
                out.push(':');
                i += 3;
            }
            c if is_name(c) => {
                let start = i;
                while i < chars.len() && is_name(chars[i]) {
                    i += 1;
                }
                let name: String = chars[start..i].iter().collect();
                // a rule definition: the name followed by ::= (possibly after spaces)
                let mut j = i;
                while j < chars.len() && (chars[j] == ' ' || chars[j] == '\t') {
                    j += 1;
                }
                let defines = chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') && chars.get(j + 2) == Some(&'=');
                if defines {
                    saw_rule = true;
                    if !out.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                }
                out.push_str(&rename(&name));
            }
            '{' => {
                // repetition {m}, {m,}, {m,n}: copied as is (Lark accepts them)
                let start = i;
                while i < chars.len() && chars[i] != '}' {
                    if !(chars[i].is_ascii_digit() || chars[i] == ',' || chars[i] == ' ' || chars[i] == '{') {
                        return err(line, "bad repetition (expected {m}, {m,} or {m,n})");
                    }
                    i += 1;
                }
                if i >= chars.len() {
                    return err(line, "unterminated repetition");
                }
                i += 1;
                let rep: String = chars[start..i].iter().filter(|c| **c != ' ').collect();
                out.push_str(&rep);
            }
            '(' | ')' | '|' | '*' | '+' | '?' | ' ' | '\t' | '\r' => {
                out.push(if c == '\r' { ' ' } else { c });
                i += 1;
            }
            other => return err(line, &format!("unexpected character {other:?}")),
        }
    }
    if !saw_rule {
        return Err("grammar: no rules (expected `root ::= ...`)".into());
    }
    if !names.iter().any(|(a, _)| a == "root") {
        return Err("grammar: no `root` rule".into());
    }
    Ok(join_continuations(&out))
}

/// One GBNF escape after the backslash: the character and how many chars it used.
fn unescape(rest: &[char]) -> Result<(char, usize), String> {
    let Some(&e) = rest.first() else { return Err("a backslash at the end of a string".into()) };
    let simple = match e {
        'n' => Some('\n'),
        'r' => Some('\r'),
        't' => Some('\t'),
        '\\' | '"' | '[' | ']' | '-' | '/' => Some(e),
        _ => None,
    };
    if let Some(c) = simple {
        return Ok((c, 1));
    }
    let width = match e {
        'x' => 2,
        'u' => 4,
        'U' => 8,
        _ => return Err(format!("unknown escape \\{e}")),
    };
    let hex: String = rest.iter().skip(1).take(width).collect();
    if hex.len() != width || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("\\{e} needs {width} hex digits"));
    }
    let code = u32::from_str_radix(&hex, 16).map_err(|e| e.to_string())?;
    let c = char::from_u32(code).ok_or_else(|| format!("\\{e}{hex} is not a Unicode scalar value"))?;
    Ok((c, 1 + width))
}

/// GBNF lets a rule's alternatives continue on following lines; Lark needs a rule on
/// one logical line unless the next line starts with `|`. Join every line that does not
/// start a new rule onto the previous one.
fn join_continuations(s: &str) -> String {
    let mut out = String::new();
    for l in s.lines() {
        let t = l.trim();
        if t.is_empty() {
            continue;
        }
        let starts_rule = t.split(':').next().is_some_and(|h| !h.is_empty() && h.trim().chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            && t.contains(':')
            && !t.starts_with('"')
            && !t.starts_with('/');
        if starts_rule || out.is_empty() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(t);
        } else {
            out.push(' ');
            out.push_str(t);
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_the_usual_constructs() {
        let g = "# yes or no\nroot ::= answer \".\"\nanswer ::= \"yes\" | \"no\"\n  | \"maybe\" # more\nnum-list ::= [0-9]+ (\",\" [0-9]+)* x{2,3} .\nx ::= [^\\]/]\n";
        let l = gbnf_to_lark(g).unwrap();
        assert!(l.contains("start: r_answer \".\""), "{l}");
        assert!(l.contains("r_answer: \"yes\" | \"no\" | \"maybe\""), "{l}");
        assert!(l.contains("r_num_list: /[0-9]/+ (\",\" /[0-9]/+)* r_x{2,3} /(?s:.)/"), "{l}");
        assert!(l.contains("r_x: /[^\\]\\/]/"), "{l}");
    }

    #[test]
    fn string_escapes_are_decoded_for_lark() {
        let l = gbnf_to_lark(r#"root ::= "\x41\u00e9\U0001F600" "\"\\\t\n\]" "\x01""#).unwrap();
        assert_eq!(l.trim(), "start: \"A\u{e9}\u{1F600}\" \"\\\"\\\\\\t\\n]\" \"\\x01\"");
        assert!(gbnf_to_lark(r#"root ::= "\q""#).unwrap_err().contains("unknown escape"));
        assert!(gbnf_to_lark(r#"root ::= "\u12""#).unwrap_err().contains("4 hex digits"));
        assert!(gbnf_to_lark(r#"root ::= "\UFFFFFFFF""#).unwrap_err().contains("not a Unicode scalar"));
    }

    #[test]
    fn errors_name_the_line() {
        assert!(gbnf_to_lark("root ::= \"abc").unwrap_err().contains("line 1"));
        assert!(gbnf_to_lark("root ::= [a-z").unwrap_err().contains("unterminated"));
        assert!(gbnf_to_lark("item ::= \"a\"").unwrap_err().contains("root"));
        assert!(gbnf_to_lark("root ::= \"a\" @").unwrap_err().contains("unexpected"));
        assert!(gbnf_to_lark("").is_err());
    }
}
