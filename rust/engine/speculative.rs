//! Speculative decoding: drafts of the next tokens, verified by the target model in one
//! forward pass with the other slots' work.
//!
//! A generating sequence with a draft evaluates its pending token and the drafted ones as
//! one span of generated tokens (`prompt_end` 0: every token in the one-token kernel orders
//! of `model/orders.rs`), so each row's logits are the bits one-token decoding computes.
//! The commit samples row by row with the request's own sampler and keeps going while the
//! sampled token equals the draft's: every committed token is the sampler's draw from the
//! target's logits for exactly the prefix one-token decoding would have had, with the same
//! random numbers in the same order. Greedy and seeded outputs are therefore identical with
//! and without speculation; only the rows of rejected drafts are wasted work, and the KV
//! cache is cut back to the accepted prefix (positions are written by index; a
//! sliding-window ring keeps `n_ubatch` spare rows, so a draft never evicts what the
//! accepted prefix still attends to).
//!
//! Draft sources (`ngram_draft.rs`, `ngram_cache.rs`): llama.cpp's `ngram-simple`,
//! `ngram-map-k`, `ngram-map-k4v`, `ngram-mod` and `ngram-cache`. Several may be on at once: as in llama.cpp, each step
//! asks them in that order and the first that drafts anything is used (and told, after
//! verification, how much of its draft was accepted).
use super::ngram_cache::{LookupFiles, LookupSeq, NgramCounts, N_DRAFT};
use super::ngram_draft::{ngram_simple, ModSeq, NgramMap, NgramMod, MOD_ENTRIES};
use crate::error::Result;
use std::path::PathBuf;

/// A draft source (llama-server's `--spec-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpecKind {
    #[default]
    None,
    NgramSimple,
    NgramMapK,
    NgramMapK4v,
    NgramMod,
    NgramCache,
    /// A draft model (`-md`, `draft_model.rs`).
    DraftSimple,
}

/// The sources llamars runs, in llama.cpp's order of preference.
const KINDS: [SpecKind; 6] =
    [SpecKind::NgramSimple, SpecKind::NgramMapK, SpecKind::NgramMapK4v, SpecKind::NgramMod, SpecKind::NgramCache, SpecKind::DraftSimple];

impl SpecKind {
    /// llama-server's names; the draft sources llamars runs.
    pub fn parse(name: &str) -> Option<SpecKind> {
        match name {
            "none" => Some(SpecKind::None),
            _ => KINDS.into_iter().find(|k| k.name() == name),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SpecKind::None => "none",
            SpecKind::NgramSimple => "ngram-simple",
            SpecKind::NgramMapK => "ngram-map-k",
            SpecKind::NgramMapK4v => "ngram-map-k4v",
            SpecKind::NgramMod => "ngram-mod",
            SpecKind::NgramCache => "ngram-cache",
            SpecKind::DraftSimple => "draft-simple",
        }
    }

    fn bit(self) -> u8 {
        match self {
            SpecKind::None => 0,
            k => 1 << (KINDS.iter().position(|&x| x == k).unwrap_or(0)),
        }
    }
}

/// Sizes of an n-gram lookup (`--spec-ngram-{simple,map-k,map-k4v}-size-n/-size-m/-min-hits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NgramParams {
    /// Length of the lookup n-gram.
    pub size_n: usize,
    /// Most tokens drafted from one match.
    pub size_m: usize,
    /// Lookups (occurrences, for ngram-simple) needed before drafting.
    pub min_hits: usize,
}

/// `ngram-mod`'s parameters (`--spec-ngram-mod-n-match/-n-min/-n-max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModParams {
    pub n_match: usize,
    pub n_min: usize,
    pub n_max: usize,
}

/// The engine's speculative decoding (server-wide: `--spec-type` and its parameters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecConfig {
    /// The draft sources on (a bit per source of `KINDS`).
    kinds: u8,
    pub simple: NgramParams,
    pub map_k: NgramParams,
    pub map_k4v: NgramParams,
    pub ngram_mod: ModParams,
    /// `ngram-cache`'s static and dynamic lookup caches (`-lcs`, `-lcd`).
    pub lookup_static: Option<PathBuf>,
    pub lookup_dynamic: Option<PathBuf>,
}

/// What the draft sources of all sequences share: the `ngram-mod` table and the lookup
/// caches read from files.
#[derive(Default)]
pub struct SharedDrafts {
    ngram_mod: Option<NgramMod>,
    lookup: LookupFiles,
}

impl Default for SpecConfig {
    fn default() -> Self {
        // llama-server 2026's defaults
        let ngram = NgramParams { size_n: 12, size_m: 48, min_hits: 1 };
        SpecConfig { kinds: 0, simple: ngram, map_k: ngram, map_k4v: ngram, ngram_mod: ModParams { n_match: 24, n_min: 48, n_max: 64 }, lookup_static: None, lookup_dynamic: None }
    }
}

/// The parameter names `SpecConfig::set` takes (llama-server's flags without
/// `--spec-`, dashes as underscores), with what each means.
pub const SPEC_PARAMS: [(&str, &str); 12] = [
    ("ngram_simple_size_n", "ngram-simple: length of the lookup n-gram"),
    ("ngram_simple_size_m", "ngram-simple: most tokens drafted from one match"),
    ("ngram_simple_min_hits", "ngram-simple: earlier occurrences needed"),
    ("ngram_map_k_size_n", "ngram-map-k: length of the key n-gram"),
    ("ngram_map_k_size_m", "ngram-map-k: most tokens drafted from one match"),
    ("ngram_map_k_min_hits", "ngram-map-k: lookups of a key before it drafts"),
    ("ngram_map_k4v_size_n", "ngram-map-k4v: length of the key n-gram"),
    ("ngram_map_k4v_size_m", "ngram-map-k4v: length of the m-grams counted after a key"),
    ("ngram_map_k4v_min_hits", "ngram-map-k4v: lookups of a key before it drafts"),
    ("ngram_mod_n_match", "ngram-mod: length of the lookup n-gram"),
    ("ngram_mod_n_min", "ngram-mod: shorter chains are not drafted"),
    ("ngram_mod_n_max", "ngram-mod: longest chain drafted"),
];

impl SpecConfig {
    /// `--spec-type`'s comma-separated list (`none` anywhere turns it off, as in
    /// llama.cpp), or what is wrong with it.
    pub fn set_types(&mut self, list: &str) -> std::result::Result<(), String> {
        let mut kinds = 0;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let k = SpecKind::parse(name).ok_or_else(|| match name {
                "draft-eagle3" | "draft-mtp" | "draft-mtp-adaptive" | "draft-dflash" | "draft-dspark" => {
                    format!("speculative decoding type '{name}' needs a draft head (EAGLE-3, MTP, DFlash) that llamars does not run yet; use draft-simple with a draft model or an n-gram type ({})", Self::types_text())
                }
                _ => format!("unknown speculative decoding type '{name}' (types: none, {})", Self::types_text()),
            })?;
            if k == SpecKind::None {
                self.kinds = 0;
                return Ok(());
            }
            kinds |= k.bit();
        }
        self.kinds = kinds;
        Ok(())
    }

    fn types_text() -> String {
        KINDS.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
    }

    /// The sources on, in order of preference.
    pub fn kinds(&self) -> impl Iterator<Item = SpecKind> + '_ {
        KINDS.into_iter().filter(|k| self.kinds & k.bit() != 0)
    }

    pub fn enabled(&self) -> bool {
        self.kinds != 0
    }

    pub fn has(&self, k: SpecKind) -> bool {
        self.kinds & k.bit() != 0
    }

    /// `none`, or the sources on as `--spec-type` lists them.
    pub fn types_name(&self) -> String {
        if !self.enabled() {
            return "none".into();
        }
        self.kinds().map(|k| k.name()).collect::<Vec<_>>().join(",")
    }

    /// Set one parameter of `SPEC_PARAMS` (a length of 0 is refused: it could never draft).
    pub fn set(&mut self, name: &str, v: usize) -> std::result::Result<(), String> {
        let slot = match name {
            "ngram_simple_size_n" => &mut self.simple.size_n,
            "ngram_simple_size_m" => &mut self.simple.size_m,
            "ngram_simple_min_hits" => &mut self.simple.min_hits,
            "ngram_map_k_size_n" => &mut self.map_k.size_n,
            "ngram_map_k_size_m" => &mut self.map_k.size_m,
            "ngram_map_k_min_hits" => &mut self.map_k.min_hits,
            "ngram_map_k4v_size_n" => &mut self.map_k4v.size_n,
            "ngram_map_k4v_size_m" => &mut self.map_k4v.size_m,
            "ngram_map_k4v_min_hits" => &mut self.map_k4v.min_hits,
            "ngram_mod_n_match" => &mut self.ngram_mod.n_match,
            "ngram_mod_n_min" => &mut self.ngram_mod.n_min,
            "ngram_mod_n_max" => &mut self.ngram_mod.n_max,
            _ => return Err(Self::unknown(name)),
        };
        let may_be_zero = name.ends_with("min_hits") || name == "ngram_mod_n_min";
        if v == 0 && !may_be_zero {
            return Err(format!("speculative decoding parameter {name} must be >= 1"));
        }
        if v > 1 << 16 {
            return Err(format!("speculative decoding parameter {name} must be <= 65536, got {v}"));
        }
        *slot = v;
        Ok(())
    }

    fn unknown(name: &str) -> String {
        let names: Vec<_> = SPEC_PARAMS.iter().map(|p| p.0).collect();
        format!("unknown speculative decoding parameter '{name}' (parameters: {})", names.join(", "))
    }

    /// Every parameter's value, in `SPEC_PARAMS` order.
    pub fn params(&self) -> Vec<(&'static str, usize)> {
        let (s, k, v, m) = (self.simple, self.map_k, self.map_k4v, self.ngram_mod);
        let values = [s.size_n, s.size_m, s.min_hits, k.size_n, k.size_m, k.min_hits, v.size_n, v.size_m, v.min_hits, m.n_match, m.n_min, m.n_max];
        SPEC_PARAMS.iter().zip(values).map(|(p, v)| (p.0, v)).collect()
    }

    /// What the sequences' draft sources share: the `ngram-mod` table when that source is
    /// on, the lookup cache files read when `ngram-cache` is (tokens checked against
    /// `n_vocab`).
    pub fn shared(&self, n_vocab: usize) -> Result<SharedDrafts> {
        let on = |k: SpecKind| self.has(k);
        let mut sh = SharedDrafts { ngram_mod: on(SpecKind::NgramMod).then(|| NgramMod::new(self.ngram_mod.n_match, MOD_ENTRIES)), ..Default::default() };
        if on(SpecKind::NgramCache) {
            if let Some(p) = &self.lookup_static {
                sh.lookup.fixed = NgramCounts::load(p, "lookup_cache_static", n_vocab)?;
            }
            if let Some(p) = &self.lookup_dynamic {
                sh.lookup.dynamic = NgramCounts::load(p, "lookup_cache_dynamic", n_vocab)?;
            }
        }
        Ok(sh)
    }

    /// The draft for a sequence whose prompt and output so far are `prompt` and `output`
    /// (its last token not evaluated yet), cut to at most `max` tokens (llama-server cuts a
    /// draft to the request's `speculative.n_max`): the first source that drafts anything.
    pub fn draft(&self, st: &mut Drafter, shared: &mut SharedDrafts, prompt: &[u32], output: &[u32], max: usize) -> Vec<u32> {
        st.last = None;
        if !self.enabled() {
            return Vec::new();
        }
        let mut h = Vec::with_capacity(prompt.len() + output.len());
        h.extend_from_slice(prompt);
        h.extend_from_slice(output);
        for kind in self.kinds() {
            let mut d = match kind {
                SpecKind::NgramSimple => ngram_simple(&h, self.simple.size_n, self.simple.size_m, self.simple.min_hits),
                SpecKind::NgramMapK => {
                    let p = self.map_k;
                    st.map_k.get_or_insert_with(|| NgramMap::new(p.size_n, p.size_m, true, p.min_hits)).draft(&h)
                }
                SpecKind::NgramMapK4v => {
                    let p = self.map_k4v;
                    st.map_k4v.get_or_insert_with(|| NgramMap::new(p.size_n, p.size_m, false, p.min_hits)).draft(&h)
                }
                SpecKind::NgramMod => match shared.ngram_mod.as_mut() {
                    Some(t) => st.ngram_mod.draft(t, prompt, &h, self.ngram_mod.n_min, self.ngram_mod.n_max),
                    None => Vec::new(),
                },
                SpecKind::NgramCache => st.lookup.draft(&shared.lookup, &h, N_DRAFT),
                // the draft model drafts for all sequences together (`make_drafts`)
                SpecKind::DraftSimple | SpecKind::None => Vec::new(),
            };
            if !d.is_empty() {
                d.truncate(max);
                st.last = Some(kind);
                return d;
            }
        }
        Vec::new()
    }
}

/// One sequence's draft sources' state, and which of them drafted last.
#[derive(Debug, Clone, Default)]
pub struct Drafter {
    map_k: Option<NgramMap>,
    map_k4v: Option<NgramMap>,
    ngram_mod: ModSeq,
    lookup: LookupSeq,
    last: Option<SpecKind>,
}

impl Drafter {
    /// The last draft came from the draft model.
    pub fn drafted_by_model(&mut self) {
        self.last = Some(SpecKind::DraftSimple);
    }

    /// `n_accepted` of the last draft's tokens were accepted: its source learns it.
    pub fn accept(&mut self, shared: &mut SharedDrafts, n_accepted: usize) {
        match self.last.take() {
            Some(SpecKind::NgramMapK) => self.map_k.iter_mut().for_each(|m| m.accept(n_accepted)),
            Some(SpecKind::NgramMapK4v) => self.map_k4v.iter_mut().for_each(|m| m.accept(n_accepted)),
            Some(SpecKind::NgramMod) => {
                if let Some(t) = shared.ngram_mod.as_mut() {
                    self.ngram_mod.accept(t, n_accepted);
                }
            }
            _ => {}
        }
    }
}

/// A request's share of it (llama-server's `speculative.n_max`, `.n_min`, `.p_min`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecParams {
    /// Most drafted tokens verified in one step (0: no speculation for this request).
    pub n_max: usize,
    /// Drafts shorter than this are not verified.
    pub n_min: usize,
    /// A draft model's least probability for a drafted token (n-gram drafts have none).
    pub p_min: f32,
}

impl Default for SpecParams {
    fn default() -> Self {
        // llama-server 2026's generation settings
        SpecParams { n_max: 16, n_min: 0, p_min: 0.75 }
    }
}

/// Most tokens one request may ask to draft per step.
pub const MAX_DRAFT: usize = 256;

/// Counters of one request (llama-server's `timings.draft_n` / `draft_n_accepted`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DraftStats {
    pub drafted: usize,
    pub accepted: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_drafts_from_the_first_source_that_has_one() {
        let mut c = SpecConfig::default();
        c.set_types("ngram-simple").unwrap();
        c.set("ngram_simple_size_n", 2).unwrap();
        c.set("ngram_simple_size_m", 3).unwrap();
        let prompt = [0, 10, 11, 12, 13, 14, 15];
        let mut st = Drafter::default();
        let mut sh = c.shared(100).unwrap();
        assert_eq!(c.draft(&mut st, &mut sh, &prompt, &[10, 11], 8), vec![12, 13, 14]);
        assert_eq!(c.draft(&mut st, &mut sh, &prompt, &[10, 11], 2), vec![12, 13]);
        let mut sh = SharedDrafts::default();
        assert!(SpecConfig::default().draft(&mut st, &mut sh, &[1, 1, 1], &[1], 4).is_empty());
        // ngram-simple (too short a sequence for m = 20) and map-k (n = 12) draft nothing;
        // ngram-mod chains what followed each 2-gram in the prompt
        c.set_types("ngram-mod,ngram-simple,ngram-map-k").unwrap();
        c.set("ngram_simple_size_m", 20).unwrap();
        assert_eq!(c.types_name(), "ngram-simple,ngram-map-k,ngram-mod");
        c.set("ngram_mod_n_match", 2).unwrap();
        c.set("ngram_mod_n_min", 1).unwrap();
        let mut sh = c.shared(100).unwrap();
        let prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 21];
        assert_eq!(c.draft(&mut st, &mut sh, &prompt, &[4, 5], 3), vec![6, 7, 8]);
        assert_eq!(st.last, Some(SpecKind::NgramMod));
        st.accept(&mut sh, 3);
        assert_eq!(st.last, None);
        // ngram-cache last: "30 31" was followed by 32 twice in the sequence
        c.set_types("ngram-cache").unwrap();
        let mut sh = c.shared(100).unwrap();
        assert_eq!(c.draft(&mut st, &mut sh, &[30, 31, 32, 30, 31, 32], &[30, 31], 1), vec![32]);
        assert_eq!(st.last, Some(SpecKind::NgramCache));
        c.lookup_static = Some("/nonexistent/lookup.bin".into());
        assert!(c.shared(100).is_err());
    }

    #[test]
    fn types_and_parameters_are_checked() {
        let mut c = SpecConfig::default();
        assert!(c.set_types("ngram-simple,none").is_ok() && !c.enabled(), "none turns it off");
        assert!(c.set_types("draft-mtp").unwrap_err().contains("draft head"));
        assert!(c.set_types("draft-simple,ngram-mod").is_ok() && c.has(SpecKind::DraftSimple));
        assert_eq!(c.types_name(), "ngram-mod,draft-simple");
        assert!(c.set_types("ngram-bogus").unwrap_err().contains("unknown"));
        for (name, _) in SPEC_PARAMS {
            c.set(name, 7).unwrap();
        }
        assert!(c.params().iter().all(|&(_, v)| v == 7));
        assert_eq!(c.params().len(), SPEC_PARAMS.len());
        assert!(c.set("ngram_map_k_size_n", 0).unwrap_err().contains(">= 1"));
        assert!(c.set("ngram_map_k_min_hits", 0).is_ok() && c.set("ngram_mod_n_min", 0).is_ok());
        assert!(c.set("ngram_size_n", 3).unwrap_err().contains("unknown"));
        assert!(c.set("ngram_mod_n_match", 1 << 20).is_err());
        assert_eq!(SpecKind::parse("ngram-map-k4v"), Some(SpecKind::NgramMapK4v));
        assert_eq!(SpecKind::parse("draft-mtp"), None);
    }
}
