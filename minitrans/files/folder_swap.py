"""Writing a whole folder as one: beside its final place, then swapped in.

    with swapped_folder("run/pretrained") as staging:
        ...write every file of the folder into staging...

A folder of several files (config.json beside model.safetensors beside a
tokenizer's files) is only usable whole: written file by file in place, a
run killed halfway leaves new weights beside an old config. So the files go
into a sibling folder, ``.tmp-pretrained``; once the body is done they are
flushed to disk, the old folder is renamed to ``.old-pretrained``, the new
one to ``pretrained``, and the old one is removed. A kill at any moment
leaves one whole folder:

    before the renames   the old folder, and a leftover .tmp-pretrained
    between them         .old-pretrained only: the next write puts it back
    after them           the new folder, perhaps a leftover .old-pretrained

``settle`` tidies what a killed write left (the next ``swapped_folder`` of
the same folder calls it first); a reader never looks at the dotted names.
Only one process may write a folder at a time (the caller makes sure:
training holds its run folder's lock).
"""

import contextlib
import os
import shutil

from minitrans.files.rules import TEMP_PREFIX, FileError

OLD_PREFIX = ".old-"  # the folder being replaced, for the moment between two renames


def staging_path(path):
    """Where the new folder of ``path`` is written before it is swapped in."""
    return _sibling(path, TEMP_PREFIX)


def old_path(path):
    """Where the old folder of ``path`` waits while the new one is swapped in."""
    return _sibling(path, OLD_PREFIX)


def _sibling(path, prefix):
    parent, name = os.path.split(os.path.normpath(os.path.abspath(path)))
    return os.path.join(parent, prefix + name)


def settle(path):
    """Undo what a killed swap of ``path`` left: the old folder put back if
    it was set aside and no folder took its place, then the leftover new
    and old folders removed."""
    old = old_path(path)
    if os.path.isdir(old) and not os.path.lexists(path):
        os.rename(old, path)  # killed between the two renames: the old one is whole
    for leftover in (staging_path(path), old):
        if os.path.isdir(leftover) and not os.path.islink(leftover):
            shutil.rmtree(leftover)


@contextlib.contextmanager
def swapped_folder(path):
    """An empty folder to write ``path``'s files into; swapped in for the
    folder ``path`` (created or replaced whole) once the body is done.
    A ``path`` that exists and is no folder is refused (a FileError)."""
    path = os.fspath(path)
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isdir(path)):
        raise FileError(f"{path}: is a file or a link, expected a folder to write (or none)")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    settle(path)
    staging = staging_path(path)
    os.mkdir(staging)
    try:
        yield staging
        _flush(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = old_path(path)
    if os.path.isdir(path):
        os.rename(path, old)
    os.rename(staging, path)
    if os.path.isdir(old):
        shutil.rmtree(old)


def _flush(folder):
    """Every file of ``folder`` on the disk before the rename that makes it
    the folder: a crash of the machine must not leave empty files in place."""
    for name in os.listdir(folder):
        if os.path.isfile(os.path.join(folder, name)):
            with open(os.path.join(folder, name), "rb") as file:
                os.fsync(file.fileno())
