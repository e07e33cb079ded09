"""Font subsetting for the PDF with HarfBuzz (the ``uharfbuzz`` wheel) instead of fontTools.

WeasyPrint embeds a subset of every font the review uses. It subsets with the system library
libharfbuzz-subset when it can find one, else with fontTools, which parses and rewrites each font in
Python: about 0.5 s of the A1 review on a quiet core (five DejaVu faces), a seventh of the whole PDF.
The ``uharfbuzz`` wheel carries HarfBuzz's subsetter compiled in, so it works without the system
library: the same two passes WeasyPrint makes with libharfbuzz-subset (the used glyphs, keeping their
ids, then the glyphs up to the last used one, so the PDF's glyph ids stay valid), in a few milliseconds.

``harfbuzz_subsetting()`` installs it for the duration of one render; without ``uharfbuzz`` (or with a
WeasyPrint whose font class has changed shape) nothing is replaced and WeasyPrint does as it did. The
subset depends only on the font file and the glyphs used: two renders give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# Tables no PDF viewer reads from an embedded TrueType font: the ones WeasyPrint drops too.
_DROP = ("BASE", "DSIG", "EBDT", "EBLC", "EBSC", "GPOS", "GSUB", "JSTF", "LTSH", "PCLT", "SVG ")


def _tag(name: str) -> int:
    return int.from_bytes(name.encode("latin-1"), "big")


def subset_font(data: bytes, index: int, glyphs, hinting: bool, notdef_outline: bool) -> bytes | None:
    """``data`` (a font file, face ``index``) cut down to the glyph ids ``glyphs``, which keep their ids;
    None when HarfBuzz cannot subset it (the caller keeps the full font or falls back)."""
    import uharfbuzz as hb

    if not glyphs:
        return None
    face = hb.Face(hb.Blob(data), index)
    first = hb.SubsetInput()
    for gid in sorted(glyphs):
        first.glyph_set.add(gid)
    flags = hb.SubsetFlags.RETAIN_GIDS | hb.SubsetFlags.PASSTHROUGH_UNRECOGNIZED | hb.SubsetFlags.DESUBROUTINIZE
    if notdef_outline:
        flags |= hb.SubsetFlags.NOTDEF_OUTLINE
    first.flags = flags
    drop = first.sets(hb.SubsetInputSets.DROP_TABLE_TAG)
    for name in _DROP:
        drop.add(_tag(name))
    kept = hb.subset(face, first)
    if kept is None:
        return None
    # Second pass: drop the empty glyphs after the last one used (ids below it must stay where they are).
    second = hb.SubsetInput()
    for gid in range(max(glyphs) + 1):
        second.glyph_set.add(gid)
    flags = hb.SubsetFlags.PASSTHROUGH_UNRECOGNIZED | hb.SubsetFlags.DESUBROUTINIZE
    if not hinting:
        flags |= hb.SubsetFlags.NO_HINTING
    if notdef_outline:
        flags |= hb.SubsetFlags.NOTDEF_OUTLINE
    second.flags = flags
    out = hb.subset(kept, second)
    if out is None:
        return None
    return bytes(out.blob.data) or None


def available() -> bool:
    """True when the HarfBuzz subsetter can replace WeasyPrint's fontTools path."""
    try:
        import uharfbuzz  # noqa: F401
        from weasyprint.pdf.fonts import Font
    except ImportError:
        return False
    return callable(getattr(Font, "subset", None))


def subsetter() -> str:
    """Which subsetter the PDF's fonts go through: ``"uharfbuzz"`` (``harfbuzz_subsetting`` in place),
    else WeasyPrint's own choice, ``"libharfbuzz-subset"`` (the system library, HarfBuzz >= 4.1) or
    ``"fontTools"`` (the slow one). Imports WeasyPrint."""
    if available():
        return "uharfbuzz"
    from weasyprint.text.ffi import harfbuzz, harfbuzz_subset

    if harfbuzz_subset is not None and harfbuzz.hb_version_atleast(4, 1, 0):
        return "libharfbuzz-subset"
    return "fontTools"


@contextmanager
def harfbuzz_subsetting() -> Iterator[bool]:
    """While the block runs, WeasyPrint subsets fonts with ``subset_font``; yields whether it does."""
    if not available():
        yield False
        return
    from weasyprint.pdf.fonts import Font

    original = Font.subset

    def subset(self, to_unicode, hinting):
        try:
            data = subset_font(self.file_content, self.index, to_unicode, hinting, bool(self.missing))
        except (AttributeError, TypeError):  # a WeasyPrint whose Font changed shape: its own way
            data = None
        if data is None:
            return original(self, to_unicode, hinting)
        self.file_content = data

    Font.subset = subset
    try:
        yield True
    finally:
        Font.subset = original
