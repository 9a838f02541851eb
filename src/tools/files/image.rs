//! `ReadImage`: one image file delivered as MCP image content.
//!
//! The format is sniffed from the content (JPEG, PNG, GIF, WebP), never from the name.
//! Sources are capped at `MAX_SOURCE_BYTES`; decoding runs under dimension and allocation
//! limits so a decompression bomb is refused instead of exhausting memory. A delivery
//! stays within `MAX_DELIVERED_BYTES` and a `MAX_LONG_EDGE` long edge: inputs within both
//! go out byte for byte, others are resized and re-encoded. A bounded per-session
//! fingerprint cache (`tools::state::images`) answers an unchanged repeat with a compact reference unless
//! `force: true`.

use super::absolute;
use crate::files::beneath::{self, BeneathError, FileKind, Roots};
use crate::files::policy;
use crate::files::read::revision_of;
use crate::tools::ToolContext;
use crate::tools::args::type_name;
use crate::tools::envelope::{Envelope, Status, ToolOutput};
use crate::tools::error::ToolError;
use crate::tools::error::mark;
use crate::tools::error_code::ErrorCode;
use crate::tools::name::ToolName;
use base64::Engine;
use image::imageops::{self, FilterType};
use image::{DynamicImage, ImageFormat, ImageReader, Limits};
use serde_json::{Map, Value, json};
use std::io::{Cursor, Read};

const TOOL: ToolName = ToolName::ReadImage;
const FIELDS: &[&str] = &["thread_id", "workspace_root", "file_path", "force"];

/// Largest source file read at all.
pub const MAX_SOURCE_BYTES: u64 = 50 * 1024 * 1024;
/// Largest encoded image delivered.
pub const MAX_DELIVERED_BYTES: usize = 2 * 1024 * 1024;
/// Longest delivered edge in pixels.
pub const MAX_LONG_EDGE: u32 = 2_560;
/// Largest decoded width or height accepted.
pub const MAX_DECODED_EDGE: u32 = 16_384;
/// Most memory a decoder may allocate.
pub const MAX_DECODE_ALLOC: u64 = 512 * 1024 * 1024;
/// JPEG quality of re-encoded opaque images.
const JPEG_QUALITY: u8 = 85;
/// Each shrink step while a re-encoding is still too large keeps this share of the edge.
const SHRINK_NUMERATOR: u32 = 3;
const SHRINK_DENOMINATOR: u32 = 4;
/// Smallest long edge tried before a delivery is given up.
const MIN_LONG_EDGE: u32 = 16;

/// A supported source format, as sniffed from magic bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Jpeg,
    Png,
    Gif,
    WebP,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Jpeg => "jpeg",
            Kind::Png => "png",
            Kind::Gif => "gif",
            Kind::WebP => "webp",
        }
    }

    pub fn mime(self) -> &'static str {
        match self {
            Kind::Jpeg => "image/jpeg",
            Kind::Png => "image/png",
            Kind::Gif => "image/gif",
            Kind::WebP => "image/webp",
        }
    }

    fn format(self) -> ImageFormat {
        match self {
            Kind::Jpeg => ImageFormat::Jpeg,
            Kind::Png => ImageFormat::Png,
            Kind::Gif => ImageFormat::Gif,
            Kind::WebP => ImageFormat::WebP,
        }
    }
}

/// The supported format of `head` (the first bytes of a file), or a short name of what
/// it appears to be instead.
pub fn sniff(head: &[u8]) -> Result<Kind, &'static str> {
    if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Ok(Kind::Jpeg);
    }
    if head.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]) {
        return Ok(Kind::Png);
    }
    if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        return Ok(Kind::Gif);
    }
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        return Ok(Kind::WebP);
    }
    Err(describe_unsupported(head))
}

fn describe_unsupported(head: &[u8]) -> &'static str {
    let starts = |p: &[u8]| head.starts_with(p);
    let trimmed = head.trim_ascii_start();
    if head.is_empty() {
        "empty file"
    } else if starts(b"%PDF") {
        "PDF"
    } else if starts(b"BM") {
        "BMP"
    } else if starts(b"II*\0") || starts(b"MM\0*") {
        "TIFF"
    } else if starts(&[0, 0, 1, 0]) {
        "ICO"
    } else if head.len() >= 12 && &head[4..8] == b"ftyp" {
        "ISO media (HEIC/AVIF/MP4)"
    } else if starts(b"PK\x03\x04") {
        "ZIP archive"
    } else if starts(b"\x7fELF") {
        "ELF binary"
    } else if trimmed.starts_with(b"<svg") || trimmed.starts_with(b"<?xml") {
        "SVG/XML text"
    } else if starts(b"RIFF") {
        "RIFF container (not WebP)"
    } else if !head.contains(&0)
        && (std::str::from_utf8(head).is_ok()
            || std::str::from_utf8(&head[..head.len().saturating_sub(3)]).is_ok())
    {
        "text"
    } else {
        "unknown binary data"
    }
}

/// A refusal with its own status, code and data.
fn refusal(status: Status, code: ErrorCode, message: String, data: Value) -> ToolOutput {
    let mut env = Envelope::completed(TOOL, message.clone(), data);
    mark(&mut env, status, code);
    env.retryable = matches!(status, Status::InvalidInput);
    ToolOutput::refusal(env)
}

fn decode_limits() -> Limits {
    let mut l = Limits::default();
    l.max_image_width = Some(MAX_DECODED_EDGE);
    l.max_image_height = Some(MAX_DECODED_EDGE);
    l.max_alloc = Some(MAX_DECODE_ALLOC);
    l
}

fn decode(bytes: &[u8], kind: Kind) -> Result<DynamicImage, image::ImageError> {
    let mut reader = ImageReader::with_format(Cursor::new(bytes), kind.format());
    reader.limits(decode_limits());
    reader.decode()
}

/// An encoded delivery.
struct Delivered {
    mime: &'static str,
    bytes: Vec<u8>,
    width: u32,
    height: u32,
}

/// The pixels a re-encoding works on: RGBA when any pixel is not fully opaque (delivered as
/// PNG), else RGB (delivered as JPEG). Converting once to one of two concrete buffers keeps
/// one resize per buffer type in the binary, not one per pixel type a decoder can return.
enum Pixels {
    Rgb(image::RgbImage),
    Rgba(image::RgbaImage),
}

impl Pixels {
    fn of(img: &DynamicImage) -> Pixels {
        if img.color().has_alpha() {
            let rgba = img.to_rgba8();
            if rgba.pixels().any(|p| p.0[3] != u8::MAX) {
                return Pixels::Rgba(rgba);
            }
        }
        Pixels::Rgb(img.to_rgb8())
    }

    fn dimensions(&self) -> (u32, u32) {
        match self {
            Pixels::Rgb(b) => b.dimensions(),
            Pixels::Rgba(b) => b.dimensions(),
        }
    }

    /// Scaled (keeping the aspect ratio) to fit a `edge` × `edge` box.
    fn fit(&self, edge: u32) -> Pixels {
        let (w, h) = self.dimensions();
        let ratio = f64::min(edge as f64 / w as f64, edge as f64 / h as f64);
        let scaled = |n: u32| ((n as f64 * ratio).round() as u32).max(1);
        let (nw, nh) = (scaled(w), scaled(h));
        match self {
            Pixels::Rgb(b) => Pixels::Rgb(imageops::resize(b, nw, nh, FilterType::Triangle)),
            Pixels::Rgba(b) => Pixels::Rgba(imageops::resize(b, nw, nh, FilterType::Triangle)),
        }
    }

    fn encode(&self) -> Result<Delivered, image::ImageError> {
        let mut out = Vec::new();
        let (width, height) = self.dimensions();
        // Encoders by name: `write_to` dispatches on the format at run time and so links
        // every encoder the features enable (WebP, GIF), which we never write.
        let mime = match self {
            Pixels::Rgba(b) => {
                b.write_with_encoder(image::codecs::png::PngEncoder::new(&mut out))?;
                "image/png"
            }
            Pixels::Rgb(b) => {
                let enc =
                    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY);
                b.write_with_encoder(enc)?;
                "image/jpeg"
            }
        };
        Ok(Delivered {
            mime,
            bytes: out,
            width,
            height,
        })
    }
}

/// Resize (keeping the aspect ratio) to a long edge of at most `MAX_LONG_EDGE` and
/// re-encode, shrinking further while the encoding exceeds `MAX_DELIVERED_BYTES`.
fn reencode(img: &DynamicImage) -> Result<Delivered, String> {
    let pixels = Pixels::of(img);
    let (w, h) = pixels.dimensions();
    let mut edge = w.max(h).min(MAX_LONG_EDGE);
    loop {
        let d = if w.max(h) <= edge {
            pixels.encode()
        } else {
            pixels.fit(edge).encode()
        };
        let d = d.map_err(|e| format!("re-encoding failed: {e}"))?;
        if d.bytes.len() <= MAX_DELIVERED_BYTES {
            return Ok(d);
        }
        let next = edge * SHRINK_NUMERATOR / SHRINK_DENOMINATOR;
        if next < MIN_LONG_EDGE {
            return Err(format!(
                "no re-encoding fits {MAX_DELIVERED_BYTES} bytes (last: {} bytes at {}×{})",
                d.bytes.len(),
                d.width,
                d.height
            ));
        }
        edge = next;
    }
}

pub fn call(ctx: &ToolContext, map: &Map<String, Value>) -> Result<ToolOutput, ToolError> {
    let (a, binding) = crate::tools::session_args(ctx, map, FIELDS)?;
    let raw = a.req_str("file_path")?;
    let force = match map.get("force") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ToolError::InvalidInput {
                detail: format!("force must be a boolean, got {}", type_name(other)),
            });
        }
    };
    let abs = absolute(&binding.workspace_root, raw);
    let roots = Roots {
        workspace: &binding.workspace_root,
        allow: ctx.allow_paths,
    };
    // Canonicalised, authorised and opened beneath its root without following a symlink;
    // a FIFO, socket or device is refused before anything could block on it.
    let (path, file) = match beneath::open_read(&roots, &abs) {
        Ok(found) => found,
        Err(BeneathError::Denied(e)) => {
            return Ok(refusal(
                Status::PolicyBlocked,
                ErrorCode::PathOutsideAllowedRoots,
                format!("{raw}: {e}"),
                json!({"path": raw}),
            ));
        }
        Err(BeneathError::NotRegular(FileKind::Directory)) => {
            let msg = format!("{raw}: is a directory");
            return Ok(refusal(
                Status::InvalidInput,
                ErrorCode::IsDirectory,
                msg,
                json!({"path": raw}),
            ));
        }
        Err(BeneathError::NotRegular(kind)) => {
            let shown = policy::canonical(&abs)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| raw.to_string());
            return Ok(ToolError::NotRegularFile { path: shown, kind }.into_output(TOOL));
        }
        Err(e) => {
            let (code, msg) = match &e {
                BeneathError::NotFound => (ErrorCode::FileNotFound, "no such file".to_string()),
                BeneathError::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied => {
                    (ErrorCode::PermissionDenied, "permission denied".to_string())
                }
                other => (ErrorCode::IoError, format!("cannot open: {other}")),
            };
            return Ok(refusal(
                Status::InvalidInput,
                code,
                format!("{raw}: {msg}"),
                json!({"path": raw}),
            ));
        }
    };
    let shown = path.to_string_lossy().into_owned();
    let unusable = |code: ErrorCode, msg: String| {
        Ok(refusal(
            Status::InvalidInput,
            code,
            format!("{shown}: {msg}"),
            json!({"path": shown}),
        ))
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return unusable(ErrorCode::IoError, format!("cannot stat: {e}")),
    };
    if meta.is_dir() {
        return unusable(ErrorCode::IsDirectory, "is a directory".into());
    }
    if !meta.is_file() {
        return unusable(ErrorCode::NotRegularFile, "not a regular file".into());
    }
    if meta.len() > MAX_SOURCE_BYTES {
        return unusable(
            ErrorCode::FileTooLarge,
            format!(
                "{} bytes; the source limit is {MAX_SOURCE_BYTES} bytes",
                meta.len()
            ),
        );
    }
    // Read at most one byte past the cap: a file growing under us is still refused.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    if let Err(e) = file.take(MAX_SOURCE_BYTES + 1).read_to_end(&mut bytes) {
        return unusable(ErrorCode::IoError, format!("read failed: {e}"));
    }
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return unusable(
            ErrorCode::FileTooLarge,
            format!("grew past the source limit of {MAX_SOURCE_BYTES} bytes"),
        );
    }
    let kind = match sniff(&bytes[..bytes.len().min(64)]) {
        Ok(k) => k,
        Err(detected) => {
            return Ok(refusal(
                Status::InvalidInput,
                ErrorCode::InvalidToolInput,
                format!(
                    "{shown} is not a supported image: its content looks like {detected} \
                     (supported: JPEG, PNG, GIF, WebP; the file name is not trusted)"
                ),
                json!({"path": shown, "detected": detected}),
            ));
        }
    };
    let sha = revision_of(&bytes);
    let state = ctx.states.of(ctx.principal, &binding.thread_id);
    if !force && let Some(summary) = state.images.lock().lookup(&sha) {
        let message = format!(
            "{shown} is unchanged since it was delivered earlier in this session ({sha}); \
             the image was not sent again. Pass force: true to receive the bytes again."
        );
        let mut data = json!({"cached": true, "sha256": sha, "path": shown});
        if let (Some(d), Some(s)) = (data.as_object_mut(), summary.as_object()) {
            for (k, v) in s {
                d.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        return Ok(ToolOutput {
            text: message.clone(),
            envelope: Envelope::completed(TOOL, message, data),
            images: Vec::new(),
        });
    }
    let img = match decode(&bytes, kind) {
        Ok(i) => i,
        Err(image::ImageError::Limits(e)) => {
            return Ok(refusal(
                Status::InvalidInput,
                ErrorCode::ImageTooLarge,
                format!(
                    "{shown}: decoding refused by limits ({e}); at most \
                     {MAX_DECODED_EDGE}×{MAX_DECODED_EDGE} px and {MAX_DECODE_ALLOC} bytes \
                     of decoded data"
                ),
                json!({"path": shown, "sourceFormat": kind.name()}),
            ));
        }
        Err(e) => {
            return unusable(
                ErrorCode::ImageDecodeFailed,
                format!("not a valid {} image: {e}", kind.name()),
            );
        }
    };
    let (sw, sh) = (img.width(), img.height());
    let fits = bytes.len() <= MAX_DELIVERED_BYTES && sw.max(sh) <= MAX_LONG_EDGE;
    let delivered = if fits {
        Delivered {
            mime: kind.mime(),
            bytes,
            width: sw,
            height: sh,
        }
    } else {
        match reencode(&img) {
            Ok(d) => d,
            Err(msg) => return unusable(ErrorCode::ImageEncodeFailed, msg),
        }
    };
    let resized = (delivered.width, delivered.height) != (sw, sh);
    let summary = json!({
        "sourceFormat": kind.name(),
        "sourceWidth": sw,
        "sourceHeight": sh,
        "sourceBytes": meta.len(),
        "mimeType": delivered.mime,
        "width": delivered.width,
        "height": delivered.height,
        "bytes": delivered.bytes.len(),
        "resized": resized,
        "reencoded": !fits,
    });
    state.images.lock().record(sha.clone(), summary.clone());
    let mut data = summary;
    data["cached"] = json!(false);
    data["sha256"] = json!(sha);
    data["path"] = json!(shown);
    let how = if fits {
        "original bytes".to_string()
    } else if resized {
        format!("resized from {sw}×{sh}")
    } else {
        "re-encoded".to_string()
    };
    let message = format!(
        "{shown}: {} {sw}×{sh} delivered as {} {}×{} ({} bytes, {how})",
        kind.name().to_uppercase(),
        delivered.mime,
        delivered.width,
        delivered.height,
        delivered.bytes.len()
    );
    let b64 = base64::engine::general_purpose::STANDARD.encode(&delivered.bytes);
    Ok(ToolOutput {
        text: message.clone(),
        envelope: Envelope::completed(TOOL, message, data),
        images: vec![(delivered.mime.to_string(), b64)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing_uses_magic_bytes_only() {
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Ok(Kind::Jpeg));
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), Ok(Kind::Png));
        assert_eq!(sniff(b"GIF89a...."), Ok(Kind::Gif));
        assert_eq!(sniff(b"GIF87a...."), Ok(Kind::Gif));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Ok(Kind::WebP));
        assert_eq!(
            sniff(b"RIFF\0\0\0\0WAVEfmt "),
            Err("RIFF container (not WebP)")
        );
        assert_eq!(sniff(b"hello, world"), Err("text"));
        assert_eq!(sniff(b"%PDF-1.7"), Err("PDF"));
        assert_eq!(sniff(b"  <svg xmlns"), Err("SVG/XML text"));
        assert_eq!(sniff(b""), Err("empty file"));
        assert_eq!(sniff(&[0xFF, 0xFE, 0x00, 0xC3]), Err("unknown binary data"));
    }

    #[test]
    fn oversized_images_are_reencoded_within_bounds() {
        let img = DynamicImage::ImageRgb8(image::RgbImage::from_fn(3_000, 1_000, |x, y| {
            image::Rgb([(x % 251) as u8, (y % 241) as u8, ((x ^ y) % 256) as u8])
        }));
        let d = reencode(&img).unwrap();
        assert_eq!(d.mime, "image/jpeg");
        assert_eq!((d.width, d.height), (2_560, 853));
        assert!(d.bytes.len() <= MAX_DELIVERED_BYTES);
        let rgba = DynamicImage::ImageRgba8(image::RgbaImage::from_pixel(
            10,
            10,
            image::Rgba([1, 2, 3, 4]),
        ));
        assert_eq!(reencode(&rgba).unwrap().mime, "image/png");
    }

    #[test]
    fn decompression_bombs_hit_the_limits() {
        // A valid PNG header claiming 100,000 × 100,000 pixels.
        let mut buf = Vec::new();
        image::RgbImage::new(1, 1)
            .write_to(&mut Cursor::new(&mut buf), ImageFormat::Png)
            .unwrap();
        buf[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        buf[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        // The IHDR CRC no longer matches; fix it so only the limits can refuse.
        let crc = crc32(&buf[12..29]);
        buf[29..33].copy_from_slice(&crc.to_be_bytes());
        match decode(&buf, Kind::Png) {
            Err(image::ImageError::Limits(_)) => {}
            other => panic!("expected a limits error, got {:?}", other.map(|_| ())),
        }
    }

    fn crc32(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
