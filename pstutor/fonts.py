"""A font with Chinese glyphs for the pictures, installed as a Python package.

Matplotlib's own font (DejaVu Sans) has no CJK glyphs, and neither have Colab's image or a
bare Linux machine, so Chinese labels would come out as empty boxes ("tofu"). The course
depends on `pylopdf-fonts-zh-cn`, a data-only wheel holding Noto Sans SC (SIL Open Font
License 1.1, about 8 MB for the sans-serif face). In Chinese it is added to matplotlib as a
fallback after the usual sans-serif font: Latin letters and digits keep their familiar
shapes, every CJK character comes from Noto Sans SC. In English nothing changes.
"""

from __future__ import annotations

import logging

from pstutor.language import current_language

CJK_FAMILY = "Noto Sans SC"


def use_language_font() -> None:
    """In Chinese, make matplotlib fall back to Noto Sans SC for the glyphs its font lacks."""
    if current_language() != "zh":
        return
    import matplotlib
    from matplotlib import font_manager

    if CJK_FAMILY not in {font.name for font in font_manager.fontManager.ttflist}:
        from pylopdf_fonts_zh_cn import sans_path

        font_manager.fontManager.addfont(str(sans_path()))
        logging.getLogger("matplotlib.font_manager").addFilter(_regular_for_bold)
    families = list(matplotlib.rcParams["font.family"])
    if CJK_FAMILY not in families:
        matplotlib.rcParams["font.family"] = [*families, CJK_FAMILY]


def _regular_for_bold(record: logging.LogRecord) -> bool:
    """Drop matplotlib's notice that bold CJK text uses the regular face (the only one shipped)."""
    return not (CJK_FAMILY in record.getMessage() and "Failed to find font weight" in record.getMessage())
