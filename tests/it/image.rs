//! ReadImage through the real binary.

use crate::support;

use base64::Engine;
use image::{ImageFormat, RgbImage, RgbaImage};
use serde_json::{Value, json};
use std::io::Cursor;
use support::{Agent, pair_args, sc};

fn read_image(a: &mut Agent, s: &Value, path: &str, extra: Value) -> Value {
    let mut args = json!({"file_path": path});
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    a.call("ReadImage", pair_args(s, args))
}

/// The single image content block of a result: (mime, decoded bytes).
fn image_block(r: &Value) -> (String, Vec<u8>) {
    let content = r["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "text", "{r}");
    let images: Vec<&Value> = content.iter().filter(|c| c["type"] == "image").collect();
    assert_eq!(images.len(), 1, "{r}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(images[0]["data"].as_str().unwrap())
        .unwrap();
    (images[0]["mimeType"].as_str().unwrap().to_string(), bytes)
}

fn encoded(img: impl Into<image::DynamicImage>, format: ImageFormat) -> Vec<u8> {
    let mut buf = Vec::new();
    img.into()
        .write_to(&mut Cursor::new(&mut buf), format)
        .unwrap();
    buf
}

#[test]
fn a_small_png_is_delivered_byte_for_byte_then_cached_until_forced() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    let png = encoded(
        RgbaImage::from_fn(40, 30, |x, y| {
            image::Rgba([x as u8 * 6, y as u8 * 8, 90, 200])
        }),
        ImageFormat::Png,
    );
    // The name lies; the content decides.
    std::fs::write(a.workspace.join("logo.jpg"), &png).unwrap();
    let r = read_image(&mut a, &s, "logo.jpg", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    let (mime, bytes) = image_block(&r);
    assert_eq!(mime, "image/png");
    assert_eq!(bytes, png);
    let d = &sc(&r)["data"];
    assert_eq!(d["sourceFormat"], "png");
    assert_eq!(
        (d["width"].clone(), d["height"].clone()),
        (json!(40), json!(30))
    );
    assert_eq!(d["resized"], false);
    assert_eq!(d["cached"], false);
    let sha = d["sha256"].as_str().unwrap().to_string();
    assert!(sha.starts_with("sha256:") && sha.len() == 71);

    // An unchanged repeat is a compact reference without image bytes.
    let r = read_image(&mut a, &s, "logo.jpg", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["content"].as_array().unwrap().len(), 1, "{r}");
    assert!(!r.to_string().contains("\"type\":\"image\""));
    let d = &sc(&r)["data"];
    assert_eq!(d["cached"], true);
    assert_eq!(d["sha256"], sha);
    assert!(r.to_string().len() < 2_000);

    // force: true sends the bytes again.
    let r = read_image(&mut a, &s, "logo.jpg", json!({"force": true}));
    assert_eq!(image_block(&r).1, png);
    assert_eq!(sc(&r)["data"]["cached"], false);

    // Changed content is a different fingerprint: delivered again without force.
    let other = encoded(RgbImage::new(8, 8), ImageFormat::Png);
    std::fs::write(a.workspace.join("logo.jpg"), &other).unwrap();
    let r = read_image(&mut a, &s, "logo.jpg", json!({}));
    assert_eq!(image_block(&r).1, other);

    // force must be a boolean.
    let r = read_image(&mut a, &s, "logo.jpg", json!({"force": "yes"}));
    assert_eq!(sc(&r)["errorCode"], "invalid_tool_input");
}

#[test]
fn a_large_jpeg_is_resized_to_the_long_edge_limit() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    // 2,880 × 2,160 (6.2 megapixels): over the 2,560 long-edge limit by enough to show the
    // 4:3 shape kept, at half the cost of a 12-megapixel photo in a debug build.
    let jpeg = encoded(
        RgbImage::from_fn(2_880, 2_160, |x, y| {
            image::Rgb([
                (x % 256) as u8,
                (y % 256) as u8,
                ((x / 16 + y / 16) % 256) as u8,
            ])
        }),
        ImageFormat::Jpeg,
    );
    std::fs::write(a.workspace.join("photo.jpeg"), &jpeg).unwrap();
    let r = read_image(&mut a, &s, "photo.jpeg", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    let (mime, bytes) = image_block(&r);
    assert_eq!(mime, "image/jpeg");
    assert!(bytes.len() <= 2 * 1024 * 1024, "{} bytes", bytes.len());
    let decoded = image::load_from_memory(&bytes).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (2_560, 1_920));
    let d = &sc(&r)["data"];
    assert_eq!(d["resized"], true);
    assert_eq!(
        (d["sourceWidth"].clone(), d["sourceHeight"].clone()),
        (json!(2_880), json!(2_160))
    );
    assert_eq!(
        (d["width"].clone(), d["height"].clone()),
        (json!(2_560), json!(1_920))
    );
    assert_eq!(d["bytes"], json!(bytes.len()));
}

#[test]
fn non_images_and_paths_outside_the_workspace_are_refused() {
    let mut a = Agent::spawn();
    let s = a.first_call();
    std::fs::write(a.workspace.join("fake.png"), "just some text\n").unwrap();
    let r = read_image(&mut a, &s, "fake.png", json!({}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(sc(&r)["errorCode"], "invalid_tool_input");
    assert_eq!(sc(&r)["data"]["detected"], "text");
    assert!(sc(&r)["message"].as_str().unwrap().contains("text"));
    assert_eq!(r["content"].as_array().unwrap().len(), 1);

    // Outside the workspace, directly or through a symlink.
    let outside = tempfile::tempdir().unwrap();
    let png = encoded(RgbImage::new(4, 4), ImageFormat::Png);
    let target = outside.path().join("secret.png");
    std::fs::write(&target, &png).unwrap();
    std::os::unix::fs::symlink(&target, a.workspace.join("link.png")).unwrap();
    for p in [target.to_str().unwrap(), "link.png", "../secret.png"] {
        let r = read_image(&mut a, &s, p, json!({}));
        assert_eq!(r["isError"], true, "{p}: {r}");
        assert_eq!(sc(&r)["errorCode"], "path_outside_allowed_roots", "{p}");
        assert!(!r.to_string().contains("\"type\":\"image\""));
    }

    let r = read_image(&mut a, &s, "missing.png", json!({}));
    assert_eq!(sc(&r)["errorCode"], "file_not_found", "{r}");

    // Without the session pair there is no read at all.
    let r = a.call("ReadImage", json!({"file_path": "fake.png"}));
    assert_eq!(sc(&r)["errorCode"], "needs_initialize", "{r}");
}
