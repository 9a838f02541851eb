//! Repository-map cursors: the snapshot they were cut from and the offset of the next
//! page, as an opaque `cm1.<snapshot>.<offset>`. A cursor is only good for the snapshot
//! it names; the map refuses it once the tree (or the query) changed.

/// Why a cursor is not one of ours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed;

const PREFIX: &str = "cm1.";

pub fn encode(snapshot: &str, offset: usize) -> String {
    format!("{PREFIX}{snapshot}.{offset}")
}

/// The (snapshot, offset) a cursor names.
pub fn decode(cursor: &str) -> Result<(&str, usize), Malformed> {
    let rest = cursor.strip_prefix(PREFIX).ok_or(Malformed)?;
    let (snapshot, offset) = rest.rsplit_once('.').ok_or(Malformed)?;
    let hex = !snapshot.is_empty() && snapshot.bytes().all(|b| b.is_ascii_hexdigit());
    let offset: usize = offset.parse().map_err(|_| Malformed)?;
    if !hex {
        return Err(Malformed);
    }
    Ok((snapshot, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_forgeries() {
        assert_eq!(decode(&encode("00ff", 30)), Ok(("00ff", 30)));
        for bad in [
            "",
            "cm1.",
            "cm1.zz.3",
            "cm1.00ff.",
            "cm1.00ff.-1",
            "x.00ff.3",
            "cm1..3",
        ] {
            assert_eq!(decode(bad), Err(Malformed), "{bad}");
        }
    }
}
