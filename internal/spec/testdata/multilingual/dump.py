"""SWE-bench Multilingual's spec table, as the swebench package defines it.

usage: dump.py [HARNESS_DIR] > multilingual.json

Prints, for each repository of MAP_REPO_VERSION_TO_SPECS_<LANG> of the
languages C/C++, Go, Java, JavaScript/TypeScript, PHP, Ruby and Rust
(constants/<lang>.py) except SWE-bench Multimodal's JavaScript
repositories, its extension (MAP_REPO_TO_EXT), and per version the spec's
fields (pre_install, install, build, test_cmd as lists; docker_specs;
apt-pkgs) and the parser the harness uses for an instance of that version
(MAP_REPO_TO_PARSER; for the dispatchers jekyll and immutable-js, the
parser they call for the instance <org>__<name>-<version>), named without
"parse_log_". HARNESS_DIR holds the swebench package (default: the one this
interpreter finds). Only the constants and log_parsers modules are
imported: the parent packages are registered empty.
"""

import importlib
import importlib.metadata
import importlib.util
import json
import sys
import types

if len(sys.argv) > 1:
    harness_dir = sys.argv[1]
else:
    found = importlib.util.find_spec("swebench")
    harness_dir = list(found.submodule_search_locations)[0].rsplit("/", 1)[0]
root = harness_dir + "/swebench"
for name, path in (
    ("swebench", root),
    ("swebench.harness", root + "/harness"),
    ("swebench.harness.log_parsers", root + "/harness/log_parsers"),
):
    pkg = types.ModuleType(name)
    pkg.__path__ = [path]
    sys.modules[name] = pkg
for name in ("swebench.types", "swebench.harness.test_spec.test_spec"):
    stand_in = types.ModuleType(name)
    stand_in.TestSpec = object
    sys.modules[name] = stand_in
utils = types.ModuleType("swebench.harness.utils")
utils.ansi_escape = lambda text: text
sys.modules["swebench.harness.utils"] = utils
sys.modules["swebench.utils"] = utils
constants = importlib.import_module("swebench.harness.constants")

# SWE-bench Multimodal's repositories, in the JavaScript table too
MULTIMODAL = {"Automattic/wp-calypso", "chartjs/Chart.js", "markedjs/marked", "processing/p5.js", "diegomura/react-pdf"}
LANGS = {"c": "C", "go": "GO", "java": "JAVA", "javascript": "JS", "php": "PHP", "ruby": "RUBY", "rust": "RUST"}


class Spec:
    def __init__(self, instance_id):
        self.instance_id = instance_id


def parser_for(module, func, repo, version):
    """The name of the parse_log_ function func calls for the instance."""
    name = func.__name__
    if name not in ("parse_log_jekyll", "parse_log_immutable_js"):
        return name[len("parse_log_"):]
    called = []
    saved = {}
    for attr in dir(module):
        if attr.startswith("parse_log_") and attr != name:
            saved[attr] = getattr(module, attr)
            setattr(module, attr, lambda log, spec, attr=attr: called.append(attr) or {})
    try:
        func("", Spec(repo.replace("/", "__") + "-" + version))
    except ValueError:
        pass
    finally:
        for attr, f in saved.items():
            setattr(module, attr, f)
    return called[0][len("parse_log_"):] if called else ""


def as_list(v):
    return [v] if isinstance(v, str) else list(v)


out = {"swebench": importlib.metadata.version("swebench") if len(sys.argv) == 1 else "", "repos": {}}
for lang, upper in LANGS.items():
    specs = importlib.import_module("swebench.harness.constants." + lang)
    parsers = importlib.import_module("swebench.harness.log_parsers." + lang)
    by_repo = getattr(parsers, "MAP_REPO_TO_PARSER_" + upper)
    for repo, versions in getattr(specs, "MAP_REPO_VERSION_TO_SPECS_" + upper).items():
        if repo in MULTIMODAL:
            continue
        entry = {"module": lang, "ext": constants.MAP_REPO_TO_EXT[repo], "versions": {}}
        for version, s in versions.items():
            v = {k: as_list(s[k]) for k in ("pre_install", "install", "build", "test_cmd") if k in s}
            if "apt-pkgs" in s:
                v["apt_pkgs"] = list(s["apt-pkgs"])
            v["docker_specs"] = dict(s.get("docker_specs", {}))
            v["parser"] = parser_for(parsers, by_repo[repo], repo, version)
            entry["versions"][version] = v
        out["repos"][repo] = entry
json.dump(out, sys.stdout, indent=1, sort_keys=True)
sys.stdout.write("\n")
