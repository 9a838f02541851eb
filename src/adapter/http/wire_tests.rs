use super::*;

fn head(text: &str) -> Result<Head, HeadError> {
    parse_head(text.as_bytes())
}

#[test]
fn head_end_is_found_across_reads_and_line_styles() {
    let h = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nBODY";
    assert_eq!(head_end(h, 0), Some(h.len() - 4));
    for from in 0..h.len() - 4 {
        assert_eq!(head_end(&h[..h.len() - 4], from), Some(h.len() - 4));
    }
    assert_eq!(head_end(b"GET / HTTP/1.1\nHost: x\n\nrest", 0), Some(24));
    assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
}

#[test]
fn a_head_parses_into_its_fields() {
    let h =
        head("\r\nPOST /mcp?x=1 HTTP/1.1\r\nHost: a:1\r\nX-A:  v \t\r\nhost: b\r\n\r\n").unwrap();
    assert_eq!((h.method(), h.target()), ("POST", "/mcp?x=1"));
    assert_eq!(h.version, Version::Http11);
    assert_eq!(h.header("x-a"), Some("v"));
    assert_eq!(h.header("HOST"), Some("a:1"));
    assert_eq!(h.count("Host"), 2);
    assert!(h.keep_alive());
    let h10 = head("GET / HTTP/1.0\r\n\r\n").unwrap();
    assert!(!h10.keep_alive());
    // HTTP/1.0 closes after every exchange, keep-alive asked or not (RFC 9112 §6.1 for a
    // chunked one; the 1.0 keep-alive opt-in is not answered).
    for h10 in [
        "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
        "POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        assert!(!head(h10).unwrap().keep_alive(), "{h10:?}");
    }
    assert!(
        !head("GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap()
            .keep_alive()
    );
}

#[test]
fn fields_are_read_back_from_the_held_head_text() {
    // Values with multi-byte characters, empty values and repeated names: every span
    // must land on the same bytes the parser saw.
    let h = head("GET /x HTTP/1.1\r\nX-A: caf\u{e9} \u{2603}\r\nX-B:\r\nx-a: 2\r\n\r\n").unwrap();
    assert_eq!(h.header("X-A"), Some("caf\u{e9} \u{2603}"));
    assert_eq!(h.header("x-b"), Some(""));
    assert_eq!(h.count("X-A"), 2);
    assert_eq!(h.header("X-C"), None);
    assert_eq!((h.method(), h.target()), ("GET", "/x"));
}

#[test]
fn malformed_and_oversized_heads_are_refused() {
    for bad in [
        "GARBAGE\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n",
        "GET  / HTTP/1.1\r\n\r\n",
        "GET http://x/ HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nNo colon\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Name: v\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\x01c\r\n\r\n",
    ] {
        assert!(matches!(head(bad), Err(HeadError::Malformed(_))), "{bad:?}");
    }
    let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
    assert_eq!(
        head(&format!("GET / HTTP/1.1\r\n{many}\r\n")),
        Err(HeadError::TooLarge)
    );
    let long = "a".repeat(MAX_HEAD_BYTES);
    assert_eq!(
        head(&format!("GET / HTTP/1.1\r\nX: {long}\r\n\r\n")),
        Err(HeadError::TooLarge)
    );
}

#[test]
fn body_framing_refuses_ambiguity() {
    let f = |fields: &str| {
        head(&format!("POST / HTTP/1.1\r\n{fields}\r\n"))
            .unwrap()
            .body()
    };
    assert_eq!(f(""), Ok(BodyFraming::None));
    assert_eq!(f("Content-Length: 0\r\n"), Ok(BodyFraming::None));
    assert_eq!(f("Content-Length: 12\r\n"), Ok(BodyFraming::Length(12)));
    assert_eq!(
        f("Content-Length: 12\r\nContent-Length: 12\r\n"),
        Ok(BodyFraming::Length(12))
    );
    assert_eq!(
        f("Content-Length: 99999999999999999999999\r\n"),
        Ok(BodyFraming::Length(u64::MAX))
    );
    assert_eq!(
        f("Transfer-Encoding: Chunked\r\n"),
        Ok(BodyFraming::Chunked)
    );
    for bad in [
        "Content-Length: 1\r\nContent-Length: 2\r\n",
        "Content-Length: -1\r\n",
        "Content-Length: 1 2\r\n",
        "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
    ] {
        assert!(f(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn responses_carry_their_framing() {
    let head = |status, headers: &[(&'static str, std::borrow::Cow<'static, str>)], len, close| {
        let mut out = b"left over ".to_vec();
        write_head(&mut out, status, headers, len, close);
        String::from_utf8(out).unwrap()
    };
    assert_eq!(
        head(200, &[("Content-Type", "text/plain".into())], 3, true),
        "left over HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\
         Connection: close\r\n\r\n"
    );
    assert_eq!(
        head(204, &[], 0, false),
        "left over HTTP/1.1 204 No Content\r\n\r\n"
    );
    assert!(head(200, &[], 2, false).ends_with("Content-Length: 2\r\n\r\n"));
}

#[test]
fn chunk_size_lines_are_strict() {
    assert_eq!(chunk_size(b"5\r\n"), Ok(5));
    assert_eq!(chunk_size(b"1aF;name=value\r\n"), Ok(0x1af));
    assert_eq!(chunk_size(b"0\r\n"), Ok(0));
    // Accepted by the old `trim()` + `from_str_radix` reading, refused now (issue 36
    // item 9): a sign, a leading blank or tab, a trailing NBSP, a bare CR in an extension,
    // a bare LF, more digits than a u64 holds.
    for bad in [
        &b"+5\r\n"[..],
        b" 5\r\n",
        b"\t5\r\n",
        b"+0\r\n",
        "5\u{a0}\r\n".as_bytes(),
        b"5;a=b\rc\r\n",
        b"5\n",
        b"10000000000000000\r\n",
        b"\r\n",
        b"x\r\n",
    ] {
        assert!(
            chunk_size(bad).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}
