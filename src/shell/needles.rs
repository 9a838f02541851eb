//! Which redaction rules a text may match, found in one pass over it.
//!
//! Each line rule of `shell::redact` lists needles: a text can match the rule only if it
//! holds one of them (lower-cased). Testing them one `contains` at a time is one pass per
//! needle (29 of them); `Needles` finds them all in one: a 65,536-bit table of the needles'
//! first two bytes, and per bigram the needles that start with it with the rules each
//! belongs to. Exact, not a superset: a rule's bit is set iff one of its needles occurs.

/// Bits per word of the bigram table.
const WORD: usize = 64;

/// A needle and the bit of each rule holding it.
type Needle = (Box<[u8]>, u8);

/// The needles of up to 8 rules, indexed by their first two bytes.
pub struct Needles {
    /// Bit `b` is set iff some needle starts with the bigram `b` (first byte high).
    first: Box<[u64; 65_536 / WORD]>,
    /// Per word of `first`, how many bits the words before it set: a set bigram's rank
    /// among the set bigrams is its index in `by_bigram`.
    before: Box<[u8; 65_536 / WORD]>,
    /// Per bigram (sorted), its needles and the bit of each rule holding the needle.
    by_bigram: Vec<(u16, Vec<Needle>)>,
    /// Per bigram (as `by_bigram`), the third bytes of its needles, a bit each (all 256
    /// when a needle is the bigram alone): English bigrams such as `gh` (`ghp_`) are
    /// common, so most hits end here.
    third: Vec<[u64; 4]>,
    /// The bits of every rule with a needle: once all are found, the scan stops.
    all: u8,
}

impl Needles {
    /// `rules[i]` holds rule `i`'s needles, space-separated and lower-case; rule `i` is bit
    /// `1 << i` of `rules_in`. Every needle has at least two bytes.
    pub fn new(rules: &[&str]) -> Needles {
        assert!(rules.len() <= 8, "a rule mask is one byte");
        let mut first = Box::new([0u64; 65_536 / WORD]);
        let mut by_bigram: Vec<(u16, Vec<Needle>)> = Vec::new();
        let mut all = 0;
        for (i, needles) in rules.iter().enumerate() {
            let bit = 1u8 << i;
            for needle in needles.split(' ').filter(|n| !n.is_empty()) {
                let bytes = needle.as_bytes();
                assert!(bytes.len() >= 2, "needle {needle:?} has under two bytes");
                all |= bit;
                let bigram = u16::from_be_bytes([bytes[0], bytes[1]]);
                first[usize::from(bigram) / WORD] |= 1 << (usize::from(bigram) % WORD);
                let slot = match by_bigram.binary_search_by_key(&bigram, |(b, _)| *b) {
                    Ok(slot) => slot,
                    Err(slot) => {
                        by_bigram.insert(slot, (bigram, Vec::new()));
                        slot
                    }
                };
                let list = &mut by_bigram[slot].1;
                match list.iter_mut().find(|(n, _)| **n == *bytes) {
                    Some((_, rules)) => *rules |= bit,
                    None => list.push((bytes.into(), bit)),
                }
            }
        }
        let mut before = Box::new([0u8; 65_536 / WORD]);
        let mut count = 0u32;
        for (word, bits) in before.iter_mut().zip(first.iter()) {
            *word = u8::try_from(count).expect("under 256 bigrams");
            count += bits.count_ones();
        }
        let third = (by_bigram.iter())
            .map(|(_, needles)| {
                let mut set = [0u64; 4];
                for (needle, _) in needles {
                    match needle.get(2) {
                        Some(&b) => set[usize::from(b) / WORD] |= 1 << (usize::from(b) % WORD),
                        None => set = [u64::MAX; 4],
                    }
                }
                set
            })
            .collect();
        Needles {
            first,
            before,
            by_bigram,
            third,
            all,
        }
    }

    /// The rules (a bit each) one of whose needles occurs in `lower`, the text lower-cased.
    pub fn rules_in(&self, lower: &[u8]) -> u8 {
        self.rules_among(lower, self.all)
    }

    /// `rules_in` of the rules in `want` only: stops once each of them is found.
    pub fn rules_among(&self, lower: &[u8], want: u8) -> u8 {
        let want = want & self.all;
        let mut found = 0;
        if want == 0 {
            return 0;
        }
        let Some(&(mut prev)) = lower.first() else {
            return 0;
        };
        for (i, &next) in lower.iter().enumerate().skip(1) {
            let bigram = u16::from_be_bytes([prev, next]);
            prev = next;
            let (word, bit) = (usize::from(bigram) / WORD, usize::from(bigram) % WORD);
            let bits = self.first[word];
            if bits & (1 << bit) == 0 {
                continue;
            }
            let slot =
                usize::from(self.before[word]) + (bits & ((1 << bit) - 1)).count_ones() as usize;
            if let Some(&b) = lower.get(i + 1) {
                let third = self.third[slot][usize::from(b) / WORD];
                if third & (1 << (usize::from(b) % WORD)) == 0 {
                    continue;
                }
            }
            found |= self.at(slot, &lower[i - 1..], want & !found);
            if found & want == want {
                break;
            }
        }
        found & want
    }

    /// The rules in `missing` one of whose needles in `by_bigram[slot]` begins `rest`.
    fn at(&self, slot: usize, rest: &[u8], missing: u8) -> u8 {
        let mut more = 0;
        for (needle, rules) in &self.by_bigram[slot].1 {
            if rules & missing & !more != 0 && rest.starts_with(needle) {
                more |= rules;
            }
        }
        more
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The rules of `shell::redact`, in order.
    fn rules() -> Vec<&'static str> {
        super::super::redact::line_rule_needles()
    }

    /// What `rules_in` replaces: one `contains` per needle.
    fn naive(rules: &[&str], lower: &str) -> u8 {
        let mut mask = 0;
        for (i, needles) in rules.iter().enumerate() {
            if needles.split(' ').any(|n| lower.contains(n)) {
                mask |= 1 << i;
            }
        }
        mask
    }

    #[test]
    fn finds_needles_at_the_ends_inside_words_and_overlapping() {
        let rules = rules();
        let needles = Needles::new(&rules);
        let cases = [
            "",
            "s",
            "sk-",
            "x sk-",
            "ghp_x",
            "xghp_",
            "gh p_ g hp_",
            "://",
            ":/ /",
            "a:/",
            "ggithub_pat_",
            "github_pa",
            "x-api-keyprivate-token",
            "-api-ke",
            "ppassword",
            "bearerbearer",
            "tokensecretpassapiprivate",
            "akiasia",
            "é sk-é",
            "ééeyj",
            "k_live_k_test_",
        ];
        for text in cases {
            assert_eq!(
                needles.rules_in(text.as_bytes()),
                naive(&rules, text),
                "{text:?}"
            );
        }
        assert_eq!(needles.rules_in(b"sk-"), 1);
        assert_eq!(needles.rules_in(b"xxx://"), 1 << 3);
        assert_eq!(needles.rules_among(b"sk- x://", 1 << 3), 1 << 3);
        assert_eq!(needles.rules_among(b"sk- x://", 1 << 2), 0);
    }

    #[test]
    fn a_two_byte_needle_matches_before_any_byte_and_at_the_end() {
        let needles = Needles::new(&["ab", "abc xy"]);
        for (text, rules) in [("ab", 1), ("xab", 1), ("abx", 1), ("abc", 3), ("ac", 0)] {
            assert_eq!(needles.rules_in(text.as_bytes()), rules, "{text:?}");
        }
    }

    #[test]
    #[should_panic(expected = "under two bytes")]
    fn a_one_byte_needle_is_refused() {
        Needles::new(&["ab c"]);
    }

    /// Pieces texts are made of: every needle, their fragments, ASCII and multi-byte chars.
    fn piece() -> impl Strategy<Value = String> {
        let mut fragments: Vec<String> = Vec::new();
        for needles in rules() {
            for needle in needles.split(' ') {
                fragments.push(needle.to_owned());
                for cut in 1..needle.len() {
                    fragments.push(needle[..cut].to_owned());
                    fragments.push(needle[cut..].to_owned());
                }
            }
        }
        prop_oneof![
            3 => prop::sample::select(fragments),
            2 => "[ -~\n]{1,3}",
            1 => "[é€😀ß]",
        ]
    }

    proptest! {
        // A failure would otherwise write a regressions file into the checkout.
        #![proptest_config(ProptestConfig {
            cases: 2_000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]
        #[test]
        fn rules_in_is_exact(pieces in prop::collection::vec(piece(), 0..24), want: u8) {
            let text = pieces.concat().to_ascii_lowercase();
            let rules = rules();
            let needles = Needles::new(&rules);
            let all = naive(&rules, &text);
            prop_assert_eq!(needles.rules_in(text.as_bytes()), all, "{:?}", text);
            prop_assert_eq!(needles.rules_among(text.as_bytes(), want), all & want, "{:?}", text);
        }
    }
}
