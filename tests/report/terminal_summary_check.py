"""terminal_summary_check.py ANALYZE DUMP: what `iscope-analyze DUMP` prints with no output named (docs/cli.md).

On a terminal (a pseudo-terminal made here, as a person's shell would give it) it is the short summary: the
latency, the primary cause, what to do first, at most three findings and the command for the whole report, in
a few lines. Into a pipe it is the whole Markdown report, as before (scripts and the other tests read it so), and
`-o -` is the whole Markdown on a terminal too. Exit 77 (skipped) where no pseudo-terminal can be opened.
"""
import os
import pty
import subprocess
import sys


def on_terminal(args):
    """Runs args with stdout and stderr on a new pseudo-terminal; returns (exit status, what it printed)."""
    try:
        master, slave = pty.openpty()
    except OSError as e:
        print(f"SKIPPED: no pseudo-terminal here ({e})")
        sys.exit(77)
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(), b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def without_stderr(text):
    """The lines of what a command printed on the terminal, less its notes and warnings (stderr shares it)."""
    return [l for l in text.splitlines() if not l.startswith(("iscope-analyze: warning:", "iscope-analyze: note:"))]


def main(analyze, dump):
    status, tty = on_terminal([analyze, dump])
    assert status == 0, f"exit {status} on a terminal:\n{tty}"
    lines = without_stderr(tty)
    for expected in ("Latency ", "Cause ", "Do first ", "Findings ", "-o report.md for the whole report"):
        assert any(expected in l for l in lines), f"the terminal summary has no '{expected}':\n{tty}"
    assert not any(l.startswith("#") for l in lines), f"Markdown on a terminal, not the summary:\n{tty}"
    assert len(lines) <= 15, f"{len(lines)} lines is not a short summary:\n{tty}"

    piped = subprocess.run([analyze, dump], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout.decode()
    assert piped.startswith("# InferScope report"), f"into a pipe, the Markdown report as documented:\n{piped[:400]}"
    assert "## Findings" in piped and "## Appendix" in piped, "into a pipe, the whole report"

    status, printed = on_terminal([analyze, dump, "-o", "-"])
    whole = "\n".join(without_stderr(printed))
    assert status == 0 and whole.startswith("# InferScope report"), f"-o - on a terminal:\n{whole[:400]}"
    assert "## Appendix" in whole, "-o - on a terminal is the whole report"
    print(f"ok: {dump}: {len(lines)} lines on a terminal, {len(piped.splitlines())} into a pipe")


if __name__ == "__main__":
    main(*sys.argv[1:])
