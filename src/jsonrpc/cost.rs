//! What a JSON message would cost in memory once parsed into a `serde_json::Value`, found
//! by one pass over its bytes before anything is built: a 16 MiB array of zeros is 8
//! million `Value`s (about 16 times its size), so a message is parsed only when its tree
//! stays near its size (`allowance`).
//!
//! Invariant: the scan is a pure function over bytes, allocates nothing and holds O(1)
//! state (the container kinds of at most `MAX_DEPTH` levels, as bits); it bounds, it does
//! not validate — malformed JSON is left to `serde_json`, which reports it.

/// Deepest nesting of arrays and objects a message may have: `serde_json`'s own recursion
/// limit, refused here first so the error says why.
pub const MAX_DEPTH: usize = 128;
/// The tree a message of any size may cost: enough for a request of a few thousand small
/// objects (an `initialize`, a long edit list), small next to the body budget.
pub const TREE_FLOOR: u64 = 4 << 20;

/// One `Value` (an enum of 32 bytes on 64-bit targets, not counting what it points to).
const VALUE: u64 = 32;
/// An array element: its `Value`, twice over (a `Vec` grown by doubling may hold twice
/// its length).
const ARRAY_SLOT: u64 = 2 * VALUE;
/// An object entry: its key `String` (24 bytes) and its `Value`, twice over (B-tree nodes
/// are at least half full).
const OBJECT_ENTRY: u64 = 2 * (24 + VALUE);
/// An object's first B-tree node (11 keys and 11 values, and links).
const OBJECT_NODE: u64 = 640;
/// What the allocator adds to a string's bytes (header and rounding).
const STRING_OVERHEAD: u64 = 32;

/// Why a message is not parsed.
#[derive(Debug, PartialEq, Eq)]
pub enum TooCostly {
    /// Nested deeper than `MAX_DEPTH`.
    TooDeep,
    /// Its tree would take more than `allowed` bytes (the scan stops there).
    TooLarge { allowed: u64 },
}

/// What a parsed message of `len` bytes may cost: twice its size, plus `TREE_FLOOR`.
pub fn allowance(len: usize) -> u64 {
    (len as u64).saturating_mul(2).saturating_add(TREE_FLOOR)
}

/// Check that `bytes` would parse into a tree within `allowance(bytes.len())` and
/// `MAX_DEPTH`. Returns the estimate (an upper bound of the tree's heap, in bytes).
pub fn check(bytes: &[u8]) -> Result<u64, TooCostly> {
    let allowed = allowance(bytes.len());
    let mut scan = Scan::default();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        match b {
            b'"' => {
                let key = scan.in_object() && scan.expect_key;
                let len = string_len(&bytes[i..]);
                i += len + 1;
                scan.cost += match key {
                    true => OBJECT_ENTRY,
                    false => scan.slot(),
                };
                if len > 0 {
                    scan.cost += len as u64 + STRING_OVERHEAD;
                }
                scan.scalar = false;
            }
            b'{' | b'[' => {
                scan.cost += scan.slot();
                if scan.depth == MAX_DEPTH {
                    return Err(TooCostly::TooDeep);
                }
                let object = b == b'{';
                scan.kinds = (scan.kinds << 1) | u128::from(object);
                scan.depth += 1;
                scan.expect_key = object;
                if object {
                    scan.cost += OBJECT_NODE;
                }
                scan.scalar = false;
            }
            b'}' | b']' => {
                if scan.depth > 0 {
                    scan.depth -= 1;
                    scan.kinds >>= 1;
                }
                scan.expect_key = false;
                scan.scalar = false;
            }
            b',' => {
                scan.expect_key = scan.in_object();
                scan.scalar = false;
            }
            b':' => {
                scan.expect_key = false;
                scan.scalar = false;
            }
            b' ' | b'\t' | b'\n' | b'\r' => scan.scalar = false,
            // A number, `true`, `false` or `null`: one value per run of such bytes.
            _ => {
                if !scan.scalar {
                    scan.cost += scan.slot();
                    scan.scalar = true;
                }
            }
        }
        if scan.cost > allowed {
            return Err(TooCostly::TooLarge { allowed });
        }
    }
    Ok(scan.cost)
}

/// The scan's state: how deep it is, which of the open containers are objects (bit 0 is
/// the innermost), whether an object key comes next, and whether it is inside a scalar.
#[derive(Default)]
struct Scan {
    cost: u64,
    depth: usize,
    kinds: u128,
    expect_key: bool,
    scalar: bool,
}

impl Scan {
    fn in_object(&self) -> bool {
        self.depth > 0 && self.kinds & 1 == 1
    }

    /// What a value costs where it stands: an array element its slot; an object value
    /// nothing more (its entry was counted with its key); the message itself one `Value`.
    fn slot(&self) -> u64 {
        match (self.depth, self.in_object()) {
            (0, _) => VALUE,
            (_, true) => 0,
            (_, false) => ARRAY_SLOT,
        }
    }
}

/// Bytes of a string's body up to its closing quote (escapes included, so at least its
/// decoded length); all of `rest` when it never closes.
fn string_len(rest: &[u8]) -> usize {
    let mut i = 0;
    while let Some(off) = rest[i..].iter().position(|b| *b == b'"' || *b == b'\\') {
        i += off;
        if rest[i] == b'"' {
            return i;
        }
        // A backslash and the byte it escapes.
        i += 2;
        if i >= rest.len() {
            return rest.len();
        }
    }
    rest.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_array_of_zeros_costs_many_times_its_size() {
        let mut zeros = b"[0".to_vec();
        zeros.extend(b",0".repeat(4 << 20));
        zeros.push(b']');
        let allowed = allowance(zeros.len());
        assert_eq!(check(&zeros), Err(TooCostly::TooLarge { allowed }));
        // The same bytes as one string cost about their size.
        let mut text = b"{\"a\":\"".to_vec();
        text.extend(std::iter::repeat_n(b'0', 8 << 20));
        text.extend(b"\"}");
        let estimate = check(&text).unwrap();
        assert!(estimate < (8 << 20) + 4096, "{estimate}");
    }

    #[test]
    fn requests_are_counted_by_their_values_keys_and_strings() {
        assert_eq!(check(b"0"), Ok(VALUE));
        assert_eq!(check(b"[1, 22, true]"), Ok(VALUE + 3 * ARRAY_SLOT));
        assert_eq!(
            check(br#"{"k": "vv", "e": ""}"#),
            Ok(VALUE + OBJECT_NODE + 2 * OBJECT_ENTRY + 3 * STRING_OVERHEAD + 4)
        );
        // Quotes, commas and brackets inside strings are text, not structure.
        assert_eq!(
            check(br#"["a\"[,{", 1]"#),
            Ok(VALUE + 2 * ARRAY_SLOT + 6 + STRING_OVERHEAD)
        );
        let rq = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"BashCommand","arguments":{"action_json":{"command":"ls"}}}}"#;
        assert!(check(rq).unwrap() < 8 * 1024);
    }

    #[test]
    fn nesting_past_the_limit_is_refused_and_malformed_text_is_left_to_the_parser() {
        let nested = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
        assert!(check(nested(MAX_DEPTH).as_bytes()).is_ok());
        assert_eq!(
            check(nested(MAX_DEPTH + 1).as_bytes()),
            Err(TooCostly::TooDeep)
        );
        for junk in [
            &b"]]]}}"[..],
            b"\"unterminated \\",
            b"{:,:}",
            b"\xff\xfe",
            b"",
        ] {
            assert!(check(junk).is_ok(), "{junk:?}");
        }
    }
}
