"""Repository rules for the offline Bazel build (Debian `bazel-bootstrap`, Bazel 4.2.x).

Nothing here downloads anything: every repository is written or symlinked
from the local machine.

* `native_rules_shim` stands in for @rules_cc and @rules_java. Bazel 4's own
  C++ toolchain files and its registered Java toolchains load
  `@rules_cc//cc:defs.bzl` / `@rules_java//java:defs.bzl`, which upstream
  Bazel fetches from the network. In Bazel 4 those rules are still native, so
  a `defs.bzl` that forwards to `native.*` is all they need (this is what
  Bazel's own offline bootstrap uses, see `mock_repos/` in Debian's
  `bazel-bootstrap-source`). Debian's `bazel-rules-cc` package is too new for
  Bazel 4 and does not load.

* `coverage_tools_stub` stands in for @remote_coverage_tools, which every
  test rule references (coverage report generator, lcov merger) and which
  upstream Bazel downloads. Its tools only fail with a message: `bazel
  coverage` is not supported, `bazel test` is.

* `tensorflow_local_config` makes @local_tensorflow from the TensorFlow that
  an installed Python imports: it symlinks the headers and
  libtensorflow_framework out of `tf.sysconfig` and wraps them in one
  cc_library. It runs only when the custom ops are built: never while
  ingraph_rl/ops/ has no .cc file; once it has, //:ingraph_rl carries the op
  library (as data) and so needs it too.
  Which Python: $PYTHON_BIN_PATH if set, else <workspace>/.venv/bin/python if
  it exists, else `python3` on PATH.
"""

def _native_rules_shim_impl(ctx):
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    ctx.file("BUILD", "")
    ctx.file(ctx.attr.package + "/BUILD", "")
    ctx.file(
        ctx.attr.package + "/defs.bzl",
        "\"\"\"Forwards to Bazel's native rules (offline stand-in for @%s).\"\"\"\n\n" % ctx.name +
        "\n".join([
            "def %s(**kwargs):\n    native.%s(**kwargs)\n" % (rule, rule)
            for rule in ctx.attr.rules
        ]),
    )

native_rules_shim = repository_rule(
    implementation = _native_rules_shim_impl,
    attrs = {
        "package": attr.string(mandatory = True),
        "rules": attr.string_list(mandatory = True),
    },
)

def _coverage_tools_stub_impl(ctx):
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    ctx.file(
        "unsupported.sh",
        "#!/bin/sh\necho 'bazel coverage is not supported by the offline ingraph_rl build (see BUILD)' >&2\nexit 1\n",
        executable = True,
    )
    ctx.file("BUILD", """package(default_visibility = ["//visibility:public"])

sh_binary(
    name = "coverage_report_generator",
    srcs = ["unsupported.sh"],
)

sh_binary(
    name = "lcov_merger",
    srcs = ["unsupported.sh"],
)
""")

coverage_tools_stub = repository_rule(implementation = _coverage_tools_stub_impl)

_TF_PROBE = """
import tensorflow as tf
print(tf.__version__)
print("\\t".join(tf.sysconfig.get_compile_flags()))
print("\\t".join(tf.sysconfig.get_link_flags()))
"""

def _find_python(ctx):
    python = ctx.os.environ.get("PYTHON_BIN_PATH", "")
    if python:
        return python
    venv_python = ctx.path(Label("//:WORKSPACE")).dirname.get_child(".venv").get_child("bin").get_child("python")
    if venv_python.exists:
        return str(venv_python)
    python = ctx.which("python3")
    if not python:
        fail("@local_tensorflow: no Python found; set PYTHON_BIN_PATH to a Python that imports tensorflow")
    return str(python)

def _tensorflow_local_config_impl(ctx):
    python = _find_python(ctx)
    result = ctx.execute(
        [python, "-c", _TF_PROBE],
        environment = {"TF_CPP_MIN_LOG_LEVEL": "3"},
        quiet = True,
    )
    if result.return_code != 0:
        fail("@local_tensorflow: `%s` could not import tensorflow (set PYTHON_BIN_PATH):\n%s" % (python, result.stderr))
    lines = result.stdout.strip().split("\n")
    version, compile_flags, link_flags = lines[-3], lines[-2].split("\t"), lines[-1].split("\t")

    include_dir = None
    defines = []
    for flag in compile_flags:
        if flag.startswith("-I"):
            include_dir = flag[2:]
        elif flag.startswith("-D"):
            defines.append(flag[2:])
        elif flag in ("--std=c++17", "-std=c++17"):
            pass  # BUILD compiles the ops with -std=c++17
        else:
            fail("@local_tensorflow: unhandled tf.sysconfig compile flag %r; update tools/bazel_repositories.bzl" % flag)

    lib_dir = None
    lib_name = None
    for flag in link_flags:
        if flag.startswith("-L"):
            lib_dir = flag[2:]
        elif flag.startswith("-l:"):
            lib_name = flag[3:]
        elif flag.startswith("-l"):
            lib_name = "lib%s.so" % flag[2:]
        else:
            fail("@local_tensorflow: unhandled tf.sysconfig link flag %r; update tools/bazel_repositories.bzl" % flag)
    if not include_dir or not lib_dir or not lib_name:
        fail("@local_tensorflow: unexpected tf.sysconfig flags: %r %r" % (compile_flags, link_flags))

    ctx.symlink(include_dir, "include")
    ctx.symlink(lib_dir + "/" + lib_name, "lib/" + lib_name)
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    ctx.file("BUILD", """# Generated by tools/bazel_repositories.bzl from {python}
# (TensorFlow {version}). Re-run with `bazel sync --configure` or
# `bazel clean --expunge` after changing the TensorFlow install.

cc_library(
    name = "tensorflow_framework",
    hdrs = glob(["include/**"], exclude = ["include/**/LICENSE*"]),
    includes = ["include"],
    defines = {defines},
    srcs = ["lib/{lib_name}"],
    visibility = ["//visibility:public"],
)
""".format(python = python, version = version, defines = repr(defines), lib_name = lib_name))

tensorflow_local_config = repository_rule(
    implementation = _tensorflow_local_config_impl,
    environ = ["PYTHON_BIN_PATH", "PATH"],
    configure = True,
)
