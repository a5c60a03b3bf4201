//! Additive logit bias, applied before every other sampler.
use super::candidates::Candidates;

/// Add each `(token, bias)` to that token's logit (entries for the same token add up;
/// tokens that are not candidates are ignored). `f32::NEG_INFINITY` bans a token.
pub(crate) fn apply_logit_bias(c: &mut Candidates, bias: &[(u32, f32)], to_search: &mut Vec<(u32, f32)>) {
    if bias.is_empty() {
        return;
    }
    to_search.clear();
    let n = c.data.len();
    for &(tok, b) in bias {
        let i = tok as usize;
        if c.identity {
            if i < n {
                c.data[i].logit += b;
            }
        } else if i < n && c.data[i].id == tok {
            c.data[i].logit += b;
        } else {
            to_search.push((tok, b));
        }
    }
    if to_search.is_empty() {
        return;
    }
    for t in c.data.iter_mut() {
        for &(tok, b) in to_search.iter() {
            if t.id == tok {
                t.logit += b;
            }
        }
    }
}
