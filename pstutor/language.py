"""The course's two languages: which one pstutor answers in, and messages written in both."""

from __future__ import annotations

LANGUAGES = ("en", "zh")
_current = "en"


def set_language(lang: str) -> None:
    """Choose the language of pstutor's messages ('en' or 'zh')."""
    global _current
    if lang not in LANGUAGES:
        raise ValueError(f"lang must be one of {LANGUAGES}, not {lang!r} / lang 只能是 'en' 或 'zh'")
    _current = lang


def current_language() -> str:
    """The language pstutor answers in."""
    return _current


def say(en: str, zh: str, lang: str | None = None) -> str:
    """Pick the message for `lang` (default: the current language).

    The course's one way to hold a text in both languages: the two versions side by side
    where the text is used. Lesson code gets its Chinese from its source's strings table
    (`pstutor.literals`); the helpers' labels (columns, figure words, statuses) and the
    glossary's terms live in one table, `pstutor.glossary`.
    """
    return zh if (lang or _current) == "zh" else en


def both(en: str, zh: str) -> str:
    """One message in both languages, for errors raised before a language can be chosen."""
    return f"{en}\n\n{zh}"
