//! What one request's grammar or JSON schema may cost, decided before it is compiled.
//! The grammar engine recurses along chains of rules, nested groups and `$ref`s, so
//! these bounds (with the compile thread's explicit stack, `COMPILE_STACK`) are what
//! keeps a hostile grammar from overflowing a stack: each is checked on the text, in one
//! pass, and a grammar past one fails with an error naming the field and the limit.

/// Stack of the thread a grammar is compiled on (reserved address space; only the pages
/// a deep grammar touches are committed). The tests compile grammars at every limit.
pub const COMPILE_STACK: usize = 512 << 20;

/// Bytes of grammar or schema text.
pub const MAX_BYTES: usize = 1 << 20;
/// Rules of a GBNF or Lark grammar.
pub const MAX_RULES: usize = 5000;
/// Nesting of groups `( … )` in a grammar, and of arrays/objects in a schema.
pub const MAX_DEPTH: usize = 100;
/// `$ref`s in a JSON schema (a chain of them is as deep as it is long).
pub const MAX_REFS: usize = 1000;

fn too_big(field: &str, what: &str, n: usize, max: usize) -> String {
    format!("{field}: {n} {what} exceeds the limit of {max}; simplify it or split it")
}

/// Check a GBNF or Lark grammar's size, rules and nesting.
pub fn check_grammar(field: &str, text: &str, lark: bool) -> Result<(), String> {
    if text.len() > MAX_BYTES {
        return Err(too_big(field, "bytes of grammar", text.len(), MAX_BYTES));
    }
    let (mut rules, mut depth, mut max_depth) = (0usize, 0usize, 0usize);
    for line in text.lines() {
        let t = line.trim_start();
        let starts_rule = if lark { lark_rule_head(t) } else { false };
        rules += starts_rule as usize;
        let b = t.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'#' if !lark => break,
                b'/' if lark && b.get(i + 1) == Some(&b'/') => break,
                b'"' | b'\'' => i = skip_quoted(b, i, b[i]),
                b'[' if !lark => i = skip_quoted(b, i, b']'),
                b'/' if lark => i = skip_quoted(b, i, b'/'),
                b'(' | b'[' => {
                    depth += 1;
                    max_depth = max_depth.max(depth);
                }
                b')' | b']' => depth = depth.saturating_sub(1),
                b':' if !lark && b[i..].starts_with(b"::=") => {
                    rules += 1;
                    i += 2;
                }
                _ => {}
            }
            i += 1;
        }
    }
    if rules > MAX_RULES {
        return Err(too_big(field, "rules", rules, MAX_RULES));
    }
    if max_depth > MAX_DEPTH {
        return Err(too_big(field, "levels of nested groups", max_depth, MAX_DEPTH));
    }
    Ok(())
}

/// `name:` / `?name:` / `NAME.2:` at the start of a Lark line (a rule or terminal).
fn lark_rule_head(t: &str) -> bool {
    let t = t.strip_prefix(['?', '!']).unwrap_or(t);
    let n = t.bytes().take_while(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.' || *c == b'-').count();
    let first = t.as_bytes().first().copied().unwrap_or(0);
    n > 0 && (first.is_ascii_alphabetic() || first == b'_') && t[n..].trim_start().starts_with(':')
}

/// Index of the closing `end` of a quoted run starting at `i` (backslash escapes
/// skipped), or the last index when it is not closed on this line.
fn skip_quoted(b: &[u8], i: usize, end: u8) -> usize {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 1,
            c if c == end => return j,
            _ => {}
        }
        j += 1;
    }
    b.len()
}

/// Check a JSON schema's size, nesting and `$ref`s.
pub fn check_schema(field: &str, text: &str, v: &serde_json::Value) -> Result<(), String> {
    if text.len() > MAX_BYTES {
        return Err(too_big(field, "bytes of schema", text.len(), MAX_BYTES));
    }
    let (mut refs, mut max_depth) = (0usize, 0usize);
    // iterative: the value itself may be as deep as serde allows
    let mut stack: Vec<(&serde_json::Value, usize)> = vec![(v, 1)];
    while let Some((x, d)) = stack.pop() {
        max_depth = max_depth.max(d);
        match x {
            serde_json::Value::Array(a) => stack.extend(a.iter().map(|y| (y, d + 1))),
            serde_json::Value::Object(m) => {
                refs += m.contains_key("$ref") as usize;
                stack.extend(m.values().map(|y| (y, d + 1)));
            }
            _ => {}
        }
    }
    if max_depth > MAX_DEPTH {
        return Err(too_big(field, "levels of nesting", max_depth, MAX_DEPTH));
    }
    if refs > MAX_REFS {
        return Err(too_big(field, "$refs", refs, MAX_REFS));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_and_nesting_are_counted_outside_strings_and_classes() {
        let g = "root ::= a \"(((\" [(]\na ::= ((\"x\"))  # (((((\n";
        assert!(check_grammar("grammar", g, false).is_ok());
        let chain: String = (0..=MAX_RULES).map(|i| format!("r{i} ::= \"x\"\n")).collect();
        assert!(check_grammar("grammar", &chain, false).unwrap_err().contains("rules exceeds the limit of 5000"));
        let deep = format!("root ::= {}\"x\"{}", "(".repeat(MAX_DEPTH + 1), ")".repeat(MAX_DEPTH + 1));
        assert!(check_grammar("grammar", &deep, false).unwrap_err().contains("nested groups"));
        let lark: String = (0..=MAX_RULES).map(|i| format!("?r{i}: \"x\" | /[(]+/ // (\n")).collect();
        assert!(check_grammar("grammar", &lark, true).unwrap_err().contains("5001 rules"));
        assert!(check_grammar("grammar", "start: /((((/ \"((\"", true).is_ok());
    }

    #[test]
    fn schemas_count_depth_and_refs() {
        let mut v = serde_json::json!({"type": "string"});
        for _ in 0..MAX_DEPTH {
            v = serde_json::json!({ "items": v });
        }
        assert!(check_schema("json_schema", "", &v).unwrap_err().contains("levels of nesting"));
        let defs: serde_json::Map<String, serde_json::Value> =
            (0..=MAX_REFS).map(|i| (format!("d{i}"), serde_json::json!({"$ref": format!("#/$defs/d{}", i + 1)}))).collect();
        let s = serde_json::json!({"$defs": defs});
        assert!(check_schema("json_schema", "", &s).unwrap_err().contains("1001 $refs"));
    }
}
