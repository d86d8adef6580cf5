"""python -m inferscope_py run [options] script.py [args...]   (or: run [options] -m module [args...])

Profiles an unmodified Python program: starts a session, switches Python call tracing on, runs the script as
__main__ with sys.argv set, and completes the dump when it ends. The script's exit status is preserved; an
uncaught exception prints its traceback and exits with status 1, as Python itself does. When no session can
start (an output that cannot be written, a bad setting), one line says why, the script is not run, exit 2.
"""

import argparse
import os
import runpy
import sys
import traceback

import inferscope_py


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m inferscope_py",
        description="Profile a Python program with InferScope (ranges, Python calls, and GPU activity when "
        "the GPU collector is present).",
    )
    p.add_argument("--version", action="version", version=f"inferscope_py {inferscope_py.__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a script (or -m module) with Python tracing on")
    run.add_argument("-o", "--output", help="dump file (default: inferscope-<pid>.iscope)")
    run.add_argument("--report", help="also write this report at exit (.md, .html, .json) with iscope-analyze")
    run.add_argument("--mode", choices=["default", "full"], default=None,
                     help="default: your code and model forward passes; full: every Python function")
    run.add_argument("--include", help="comma list of module or path prefixes: trace only these")
    run.add_argument("--exclude", help="comma list of module or path prefixes never traced")
    run.add_argument("--max-depth", type=int, default=None, help="deepest recorded call nesting (0 = unlimited)")
    run.add_argument("-m", dest="module", help="run a library module as a script, like python -m")
    run.add_argument("target", nargs=argparse.REMAINDER, help="script.py [args...] (or the module's args)")
    return p


def _print_exception(exc):
    # Hide this runner's frames: the traceback starts in the user's program, as it would without us.
    tb = exc.__traceback__
    ours = (os.path.abspath(__file__), os.path.abspath(runpy.__file__))
    while tb is not None and (os.path.abspath(tb.tb_frame.f_code.co_filename) in ours
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _start(config):
    """inferscope_py.start(**config): True, False when INFERSCOPE_ENABLE=1 already started a session (the
    script records into it), or None after one line saying why nothing can record (an output that cannot be
    written, a bad INFERSCOPE_* value or .inferscope.yaml): the runner's failure, not the script's, so no
    traceback."""
    try:
        return inferscope_py.start(**config)
    except (RuntimeError, ValueError, TypeError) as e:
        message = str(e)
        if message.startswith("inferscope: "):
            message = message[len("inferscope: "):]
        print(f"python -m inferscope_py run: {message}", file=sys.stderr)
        return None


def _script_problem(args):
    """Why the script cannot be run, before any session starts (so a mistyped name records no dump of nothing):
    a message, or None. `run -- script.py` is read as `run script.py`; with -m MODULE a `--` is the module's own."""
    if args.module is not None:
        return None
    if args.target[:1] == ["--"]:
        args.target = args.target[1:]
    if not args.target:
        return "no script given"
    if not os.path.exists(args.target[0]):
        return f"cannot open '{args.target[0]}': no such file"
    return None


def _run(args):
    problem = _script_problem(args)
    if problem:
        print(f"python -m inferscope_py run: {problem}", file=sys.stderr)
        return 2
    config = {}
    if args.output:
        config["output"] = args.output
    if args.report:
        config["report"] = args.report
    started = _start(config)
    if started is None:
        return 2
    filters = {k: v for k, v in (("mode", args.mode), ("include", args.include), ("exclude", args.exclude),
                                 ("max_depth", args.max_depth)) if v is not None}
    try:
        inferscope_py.trace_python(True, **filters)
    except RuntimeError as e:  # e.g. another profiler holds the hook: ranges still record
        print(f"inferscope: {e}", file=sys.stderr)

    status = 0
    script = None
    try:
        if args.module is not None:
            sys.argv = [args.module] + args.target
            runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        else:
            script = args.target[0]
            sys.argv = list(args.target)
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            status = 0
        elif isinstance(code, int):
            status = code
        else:
            print(code, file=sys.stderr)
            status = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        status = 130
    except BaseException as e:  # noqa: BLE001 - the script's own failure, reported like Python does
        _print_exception(e)
        status = 1
    finally:
        inferscope_py.trace_python(False)
        if started:
            path = inferscope_py.output_path()
            inferscope_py.stop()
            print(f"inferscope: wrote {path}", file=sys.stderr)
    return status


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
