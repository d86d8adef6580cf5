#!/usr/bin/env python3
"""Runs the built iscope-config as a user would and checks its output and exit codes.

usage: iscope_config_test.py ISCOPE_CONFIG_BINARY DOCS_CONFIGURATION_MD [--update-docs]

--update-docs rewrites the generated key reference in docs/configuration.md from `iscope-config keys
--markdown` instead of testing; the test `test_docs_match_the_tool` fails whenever the two differ.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

BINARY = None
DOCS = None
BEGIN = "<!-- BEGIN GENERATED: iscope-config keys --markdown -->\n"
END = "<!-- END GENERATED -->\n"

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def clean_environment(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERSCOPE_")}
    env.update(extra)
    return env


class IscopeConfigTest(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="iscope-config-tool-")
        self.dir = self._dir.name

    def tearDown(self):
        self._dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_tool(self, *args, **env):
        return subprocess.run([BINARY, *args], cwd=self.dir, env=clean_environment(**env),
                              capture_output=True, text=True, timeout=60)

    def show_sources(self, *args, **env):
        """{key: (value_text, source_comment)} from `show`'s text output."""
        result = self.run_tool("show", *args, **env)
        self.assertEqual(result.returncode, EXIT_OK, result.stderr)
        settings = {}
        for line in result.stdout.splitlines():
            if line.startswith("#"):
                continue
            setting, _, source = line.partition("  # ")
            key, _, value = setting.partition(": ")
            settings[key] = (value.strip(), source.strip())
        return settings

    def keys(self):
        result = self.run_tool("show", "--json")
        self.assertEqual(result.returncode, EXIT_OK, result.stderr)
        return list(json.loads(result.stdout)["settings"])

    # --- show ---------------------------------------------------------------------------------------------

    def test_show_lists_every_key_with_its_default(self):
        settings = self.show_sources()
        self.assertEqual(list(settings), self.keys())
        self.assertGreaterEqual(len(settings), 26)
        for key, (value, source) in settings.items():
            self.assertEqual(source, "default", key)
        self.assertEqual(settings["trace_size_mb"][0], "100")
        self.assertEqual(settings["buffer_mode"][0], "stream")
        self.assertEqual(settings["output"][0], '""')

    def test_show_precedence_flag_over_environment_over_file_over_default(self):
        path = self.write(".inferscope.yaml", "trace_size_mb: 8\nflush_period_ms: 7\nsample_period_ms: 3\n")
        settings = self.show_sources("--set", "trace_size_mb=32",
                                     INFERSCOPE_TRACE_SIZE_MB="16", INFERSCOPE_FLUSH_PERIOD_MS="9")
        self.assertEqual(settings["trace_size_mb"], ("32", "flag --set trace_size_mb"))
        self.assertEqual(settings["flush_period_ms"], ("9", "env INFERSCOPE_FLUSH_PERIOD_MS"))
        self.assertEqual(settings["sample_period_ms"], ("3", f"file {path}:3"))
        self.assertEqual(settings["calibration_period_ms"], ("1000", "default"))

    def test_show_reads_the_file_named_by_config_flag_or_environment(self):
        self.write(".inferscope.yaml", "step: cwd\n")
        env_file = self.write("env.yaml", "step: env\n")
        flag_file = self.write("flag.yaml", "\nstep: flag\n")
        self.assertEqual(self.show_sources()["step"][0], '"cwd"')
        self.assertEqual(self.show_sources(INFERSCOPE_CONFIG=env_file)["step"], ('"env"', f"file {env_file}:1"))
        self.assertEqual(self.show_sources("--config", flag_file, INFERSCOPE_CONFIG=env_file)["step"],
                         ('"flag"', f"file {flag_file}:2"))

    def test_set_keeps_commas_in_list_values(self):
        settings = self.show_sources("--set", "python_include=torch,transformers")
        self.assertEqual(settings["python_include"][0], '"torch,transformers"')

    def test_show_json_types_values_and_names_sources(self):
        path = self.write(".inferscope.yaml", "enable: yes\n")
        result = self.run_tool("show", "--json", "--set", "launch_bound_max_kernel_us=2.5", INFERSCOPE_OUTPUT="x.iscope")
        self.assertEqual(result.returncode, EXIT_OK, result.stderr)
        doc = json.loads(result.stdout)
        self.assertEqual(doc["config_file"], path)
        s = doc["settings"]
        self.assertEqual(s["enable"], {"value": True, "source": f"file:{path}:1"})
        self.assertEqual(s["output"], {"value": "x.iscope", "source": "env:INFERSCOPE_OUTPUT"})
        self.assertEqual(s["launch_bound_max_kernel_us"], {"value": 2.5, "source": "flag:--set launch_bound_max_kernel_us"})
        self.assertEqual(s["trace_size_mb"], {"value": 100, "source": "default"})

    def test_show_output_is_a_valid_config_file(self):
        result = self.run_tool("show", "--set", "step=on", "--set", "buffer_mode=ring")
        self.assertEqual(result.returncode, EXIT_OK, result.stderr)
        saved = self.write("saved.yaml", result.stdout)
        self.assertEqual(self.run_tool("validate", saved).stdout, "OK\n")
        settings = self.show_sources("--config", saved)
        self.assertEqual(settings["step"][0], '"on"')  # still the string "on", not a boolean
        self.assertEqual(settings["buffer_mode"], ("ring", f"file {saved}:5"))

    def test_show_refuses_an_invalid_configuration(self):
        self.write(".inferscope.yaml", "trace_size: 8\n")
        result = self.run_tool("show", INFERSCOPE_LOG_LEVEL="loud")
        self.assertEqual(result.returncode, EXIT_INVALID)
        self.assertEqual(result.stdout, "")
        self.assertIn(".inferscope.yaml:1: unknown key 'trace_size'; did you mean 'trace_size_mb'?", result.stderr)
        self.assertIn("environment variable INFERSCOPE_LOG_LEVEL: log_level: 'loud' is not an allowed value; "
                      "allowed: one of: error, warn, info, debug", result.stderr)

    def test_show_refuses_unknown_environment_settings_but_not_internal_variables(self):
        result = self.run_tool("show", INFERSCOPE_ENABLED="1")
        self.assertEqual(result.returncode, EXIT_INVALID)
        self.assertIn("INFERSCOPE_ENABLED: not an InferScope setting; did you mean INFERSCOPE_ENABLE?", result.stderr)
        result = self.run_tool("show", INFERSCOPE_CHILD="1", INFERSCOPE_INJECTED="1", INFERSCOPE_CLOCK="tsc",
                               INFERSCOPE_ROOT_PID="1", INFERSCOPE_ANALYZE="/bin/true",
                               INFERSCOPE_FOLLOW_CHILDREN="0")
        self.assertEqual(result.returncode, EXIT_OK, result.stderr)

    def test_show_refuses_a_bad_flag(self):
        result = self.run_tool("show", "--set", "thread_buffer_kb=100")
        self.assertEqual(result.returncode, EXIT_INVALID)
        self.assertIn("flag --set thread_buffer_kb: thread_buffer_kb: 100 is not a power of two", result.stderr)
        result = self.run_tool("show", "--set", "trace_size_mb")
        self.assertEqual(result.returncode, EXIT_USAGE)
        self.assertIn("--set expects key=value", result.stderr)

    def test_missing_config_file_is_an_error(self):
        result = self.run_tool("show", "--config", "nope.yaml")
        self.assertEqual(result.returncode, EXIT_INVALID)
        self.assertIn("cannot read config file 'nope.yaml' (named by --config)", result.stderr)

    # --- validate -----------------------------------------------------------------------------------------

    def test_validate_accepts_a_good_file(self):
        path = self.write("good.yaml", "enable: true\nbuffer_mode: ring\ntrace_size_mb: 512\n"
                                       "python_exclude: [numpy, json]\nreport: out.html\n")
        result = self.run_tool("validate", path)
        self.assertEqual((result.returncode, result.stdout, result.stderr), (EXIT_OK, "OK\n", ""))

    def test_validate_lists_every_error_with_line_key_and_allowed_values(self):
        path = self.write("bad.yaml", "enable: maybe\ntrace_size_mb: 0\nbufer_mode: ring\n")
        result = self.run_tool("validate", path)
        self.assertEqual(result.returncode, EXIT_INVALID)
        self.assertNotIn("OK", result.stdout)
        self.assertEqual(result.stderr.splitlines(), [
            f"{path}:1: enable: 'maybe' is not a boolean; allowed: true or false (also yes/no, on/off, 1/0)",
            f"{path}:2: trace_size_mb: 0 is out of range; allowed: an integer in [1, 65536]",
            f"{path}:3: unknown key 'bufer_mode'; did you mean 'buffer_mode'?",
        ])

    def test_validate_reports_yaml_syntax_errors_with_line(self):
        path = self.write("broken.yaml", "enable: true\nstep: \"open\n")
        result = self.run_tool("validate", path)
        self.assertEqual(result.returncode, EXIT_INVALID)
        self.assertRegex(result.stderr, "^" + path + r":\d+:\d+: YAML syntax error: ")

    def test_validate_checks_only_the_file(self):
        path = self.write("good.yaml", "enable: true\n")
        result = self.run_tool("validate", path, INFERSCOPE_TRACE_SIZE_MB="zero")
        self.assertEqual((result.returncode, result.stdout), (EXIT_OK, "OK\n"))

    def test_validate_missing_file(self):
        result = self.run_tool("validate", "absent.yaml")
        self.assertEqual(result.returncode, EXIT_INVALID)
        self.assertIn("cannot read config file 'absent.yaml'", result.stderr)

    # --- usage and keys -----------------------------------------------------------------------------------

    def test_usage_errors(self):
        for args in ([], ["frobnicate"], ["validate"], ["show", "extra"], ["show", "--no-such-option"]):
            result = self.run_tool(*args)
            self.assertEqual(result.returncode, EXIT_USAGE, args)
            self.assertNotEqual(result.stderr, "", args)

    def test_boolean_flags_mean_the_value_written(self):
        # --json=false printed JSON and --markdown=0 the Markdown table: any value turned them on. They read as every
        # tool's boolean flags now (tools/common/tool_common.hpp).
        text = self.run_tool("show").stdout
        for off in ("--json=false", "--json=0", "--json=no", "--json=OFF"):
            result = self.run_tool("show", off)
            self.assertEqual((result.returncode, result.stdout), (EXIT_OK, text), off)
        for on in ("--json", "--json=true", "--json=1", "--json=yes"):
            result = self.run_tool("show", on)
            self.assertEqual(result.returncode, EXIT_OK, on)
            json.loads(result.stdout)
        plain = self.run_tool("keys").stdout
        table = self.run_tool("keys", "--markdown").stdout
        self.assertNotEqual(plain, table)
        self.assertEqual(self.run_tool("keys", "--markdown=0").stdout, plain)
        self.assertEqual(self.run_tool("keys", "--markdown=false").stdout, plain)
        self.assertEqual(self.run_tool("keys", "--markdown=on").stdout, table)
        result = self.run_tool("show", "--json=maybe")
        self.assertEqual(result.returncode, EXIT_USAGE)
        self.assertIn("--json=maybe: 'maybe' is not a boolean", result.stderr)
        self.assertEqual(result.stdout, "")

    def test_keys_lists_every_key_and_its_variable(self):
        result = self.run_tool("keys")
        self.assertEqual(result.returncode, EXIT_OK)
        for key in self.keys():
            self.assertIn(f"{key}  (INFERSCOPE_{key.upper()})", result.stdout)

    def test_docs_match_the_tool(self):
        with open(DOCS) as f:
            text = f.read()
        self.assertIn(BEGIN, text)
        self.assertIn(END, text)
        documented = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
        generated = self.run_tool("keys", "--markdown").stdout
        self.assertEqual(documented, generated,
                         "docs/configuration.md is out of date; regenerate it with "
                         "tests/config/iscope_config_test.py BUILD/tools/iscope-config/iscope-config "
                         "docs/configuration.md --update-docs")


def update_docs():
    generated = subprocess.run([BINARY, "keys", "--markdown"], capture_output=True, text=True, check=True).stdout
    with open(DOCS) as f:
        text = f.read()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    with open(DOCS, "w") as f:
        f.write(text[:start] + generated + text[end:])


if __name__ == "__main__":
    BINARY, DOCS = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if "--update-docs" in sys.argv[3:]:
        update_docs()
        sys.exit(0)
    unittest.main(argv=sys.argv[:1], verbosity=2)
