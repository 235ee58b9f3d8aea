//! Fonts and text: DejaVu Sans compiled in, laid out with ab_glyph, and the pen that writes with it.

use super::*;

/// DejaVu Sans, parsed once.
pub(super) struct Faces {
    pub(super) regular: FontRef<'static>,
    pub(super) bold: FontRef<'static>,
}

/// Loads DejaVu Sans once per process, also registering it as plotters' "sans-serif"
/// (plotters lays out its empty mesh labels with it), and returns a pen that writes
/// with it.
pub(super) fn fonts() -> anyhow::Result<Pen> {
    static FACES: OnceLock<Option<Faces>> = OnceLock::new();
    let faces = FACES.get_or_init(|| {
        let (regular, bold) = (dejavu::sans::regular(), dejavu::sans::bold());
        register_font("sans-serif", FontStyle::Normal, regular).ok()?;
        register_font("sans-serif", FontStyle::Bold, bold).ok()?;
        Some(Faces {
            regular: FontRef::try_from_slice(regular).ok()?,
            bold: FontRef::try_from_slice(bold).ok()?,
        })
    });
    let faces = faces
        .as_ref()
        .context("the embedded DejaVu Sans font did not load")?;
    Ok(Pen(faces))
}

/// Writes with the embedded DejaVu Sans.
#[derive(Clone, Copy)]
pub(super) struct Pen(pub(super) &'static Faces);

impl Pen {
    /// Black regular text of `size` pixels whose top-left corner is at `at`.
    pub(super) fn text<C>(self, text: String, at: C, size: f32) -> Label<C> {
        Label {
            font: &self.0.regular,
            bold: &self.0.bold,
            text,
            at,
            size,
            nudge: (0, 0),
            anchor: (HPos::Left, VPos::Top),
            rotated: false,
        }
    }

    /// The width of `text` in regular type of `size` pixels.
    pub(super) fn width(self, text: &str, size: f32) -> i32 {
        layout(&self.0.regular, text, size).1.ceil() as i32
    }
}

/// A line of text as a plotters element, anchored at a point in any coordinates.
pub(super) struct Label<C> {
    pub(super) font: &'static FontRef<'static>,
    pub(super) bold: &'static FontRef<'static>,
    pub(super) text: String,
    pub(super) at: C,
    pub(super) size: f32,
    /// Pixels added to `at` once mapped.
    pub(super) nudge: (i32, i32),
    /// Which point of the text's box is at `at`.
    pub(super) anchor: (HPos, VPos),
    /// Turned a quarter counter-clockwise (reads upwards), about `at`.
    pub(super) rotated: bool,
}

impl<C> Label<C> {
    pub(super) fn anchor(self, h: HPos, v: VPos) -> Self {
        Self {
            anchor: (h, v),
            ..self
        }
    }

    pub(super) fn nudge(self, dx: i32, dy: i32) -> Self {
        Self {
            nudge: (dx, dy),
            ..self
        }
    }

    pub(super) fn rotated(self) -> Self {
        Self {
            rotated: true,
            ..self
        }
    }

    pub(super) fn bold(self) -> Self {
        Self {
            font: self.bold,
            ..self
        }
    }

    /// The offset of the text's top-left corner from the anchor point.
    pub(super) fn offset(&self, width: f32, height: f32) -> (f32, f32) {
        let dx = match self.anchor.0 {
            HPos::Left => 0.0,
            HPos::Center => -width / 2.0,
            HPos::Right => -width,
        };
        let dy = match self.anchor.1 {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        };
        (dx, dy)
    }
}

impl<'a, C: 'a> PointCollection<'a, C> for &'a Label<C> {
    type Point = &'a C;
    type IntoIter = std::iter::Once<&'a C>;

    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for Label<C> {
    fn draw<I: Iterator<Item = BackendCoord>>(
        &self,
        mut points: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = points.next() else {
            return Ok(());
        };
        let origin = (x + self.nudge.0, y + self.nudge.1);
        let (glyphs, width) = layout(self.font, &self.text, self.size);
        let scaled = self.font.as_scaled(self.size);
        let (dx, dy) = self.offset(width, scaled.ascent() - scaled.descent());
        for mut glyph in glyphs {
            glyph.position.x += dx;
            glyph.position.y += dy;
            let Some(outline) = self.font.outline_glyph(glyph) else {
                continue;
            };
            let min = outline.px_bounds().min;
            let mut pixels = Vec::new();
            outline.draw(|gx, gy, coverage| {
                if coverage > 0.0 {
                    pixels.push((min.x as i32 + gx as i32, min.y as i32 + gy as i32, coverage));
                }
            });
            for (lx, ly, coverage) in pixels {
                let at = if self.rotated {
                    (origin.0 + ly, origin.1 - lx)
                } else {
                    (origin.0 + lx, origin.1 + ly)
                };
                let color = TEXT.mix(f64::from(coverage.min(1.0)));
                backend.draw_pixel(at, color.to_backend_color())?;
            }
        }
        Ok(())
    }
}

/// The glyphs of `text` at `size` pixels with the box's top-left corner at (0, 0),
/// kerned, and the text's advance width.
pub(super) fn layout(font: &FontRef<'static>, text: &str, size: f32) -> (Vec<Glyph>, f32) {
    let scaled = font.as_scaled(size);
    let mut glyphs = Vec::with_capacity(text.len());
    let mut pen_x = 0.0;
    let mut previous = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(previous) = previous {
            pen_x += scaled.kern(previous, id);
        }
        glyphs.push(id.with_scale_and_position(size, point(pen_x, scaled.ascent())));
        pen_x += scaled.h_advance(id);
        previous = Some(id);
    }
    (glyphs, pen_x)
}
