"""What the plotting scripts of experiments/ share: a figure written whole or not at all, with the same
bytes for the same input.

A figure is drawn into a temporary file beside its output and renamed over it once complete, so that a
failed or interrupted draw (a full disk, Ctrl-C) leaves the older figure, or nothing, in its place.
No date, software version or creator goes into the file's metadata.
"""

import os
import tempfile


class OutputError(Exception):
    """An output a figure cannot be written to: one line naming it and why."""


FORMATS = {".png": "png", ".svg": "svg"}


def format_of(path):
    """'png' or 'svg' by the path's extension (either case), None for any other: what save_whole writes."""
    return FORMATS.get(os.path.splitext(path)[1].lower())


def save_whole(fig, path, dpi):
    """Writes matplotlib figure `fig` to `path` as its extension says (format_of, which the callers
    check first): whole, or not at all."""
    fmt = format_of(path)
    if fmt is None:
        raise ValueError(f"{path}: not a .png or .svg path")
    metadata = {"Date": None, "Creator": None} if fmt == "svg" else {"Software": None}
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=f".{fmt}",
                                    dir=os.path.dirname(path) or ".")
    except OSError as e:
        raise OutputError(f"{path}: cannot write ({e.strerror})")
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format=fmt, dpi=dpi, metadata=metadata)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
