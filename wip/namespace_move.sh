#!/usr/bin/env bash
# Issue 21 §4: every module the wheel installs under the kit's own import namespace.
#
#   statemachines (top-level name)   -> fanout_kit.statemachines (statemachines/ stays at the
#                                       repository's top; fanout_kit/statemachines is a symlink to it)
#   fanout_common (lambdas/...)      -> fanout_kit.common        (moved to fanout_kit/common/)
#   fanout.local, fanout.ops         -> fanout_kit.local, fanout_kit.ops
#   fanout.pytest_plugin             -> fanout_kit.pytest_plugin
#   fanout.cli                       -> fanout_kit.cli.main
#   fanout.X (every other fanout/X.py)-> fanout_kit.cli.X
#   python -m fanout                 -> python -m fanout_kit     (fanout/__main__.py -> fanout_kit/)
#
# Run it from the repository's top on a clean tree (git mv + text rewrites of the tracked *.py,
# *.md, *.sh, *.toml, *.ini, *.yml, *.yaml, *.txt, *.cfg, *.json and wip/*.patch files). It is
# idempotent: on a tree that is already moved it only rewrites old names that came back (e.g. the
# new files of a branch rebased over the move), so another branch can run it after its rebase.
# fanout/<anything else>/ moves to fanout_kit/<same>/. Review `git diff` afterwards: prose that
# names the old package folder as a whole ("fanout/") is not rewritten, nor ruff.toml and lines
# marked "namespace-move: keep"; ruff's banned-api (TID251) finds any old import name left.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

mv_tracked() {  # git mv SRC DST when SRC is tracked (creating DST's folder)
  local src=$1 dst=$2
  if [ -n "$(git ls-files -- "$src")" ]; then
    mkdir -p "$(dirname "$dst")"
    if [ -e "$dst" ] && [ -d "$src" ] && [ -d "$dst" ]; then  # merge a folder into an existing one
      for f in $(git ls-files -- "$src"); do
        mkdir -p "$(dirname "$dst/${f#"$src"/}")"
        git mv "$f" "$dst/${f#"$src"/}"
      done
    else
      git mv "$src" "$dst"
    fi
  fi
}

# The fanout/ modules, by name, before they move (for the text rewrites below)
cli_modules=()
for f in $(git ls-files 'fanout/*.py' | grep -v '^fanout/.*/'); do
  name=$(basename "$f" .py)
  case $name in __init__|__main__|cli|pytest_plugin) ;; *) cli_modules+=("$name") ;; esac
done
# ... and those already under fanout_kit/cli (a rebased branch's new files refer to them too)
for f in $(git ls-files 'fanout_kit/cli/*.py'); do
  name=$(basename "$f" .py)
  case $name in __init__|main) ;; *) cli_modules+=("$name") ;; esac
done
sub_packages=(local ops)
for d in $(git ls-files 'fanout/*/' | cut -d/ -f2 | sort -u); do
  case " ${sub_packages[*]} " in *" $d "*) ;; *) sub_packages+=("$d") ;; esac
done

# 1. Moves
mv_tracked lambdas/fanout_common fanout_kit/common
for d in "${sub_packages[@]}"; do mv_tracked "fanout/$d" "fanout_kit/$d"; done
mv_tracked fanout/pytest_plugin.py fanout_kit/pytest_plugin.py
mv_tracked fanout/__main__.py fanout_kit/__main__.py
mv_tracked fanout/cli.py fanout_kit/cli/main.py
mv_tracked fanout/__init__.py fanout_kit/cli/__init__.py
for name in "${cli_modules[@]}"; do mv_tracked "fanout/$name.py" "fanout_kit/cli/$name.py"; done
if [ ! -L fanout_kit/statemachines ]; then
  ln -s ../statemachines fanout_kit/statemachines
  git add fanout_kit/statemachines
fi

# 2. Text rewrites (perl: look-behinds keep fanout_kit.x, my_fanout.x, a/fanout/x untouched)
cli_alt=$(IFS='|'; echo "${cli_modules[*]}")
sub_alt=$(IFS='|'; echo "${sub_packages[*]}")
export CLI_ALT=$cli_alt SUB_ALT=$sub_alt
files=$(git ls-files -- '*.py' '*.md' '*.sh' '*.toml' '*.ini' '*.yml' '*.yaml' '*.txt' '*.cfg' '*.json' 'wip/*.patch' \
  | grep -v -e '^wip/namespace_move.sh$' -e '^tests/__snapshots__/' -e '^package-lock.json$' -e '^package.json$' \
    -e '^ruff.toml$')
# shellcheck disable=SC2086
perl -pi -e '
  BEGIN { $cli = $ENV{CLI_ALT} || "(?!)"; $sub = $ENV{SUB_ALT}; }
  next if /namespace-move: keep/;  # a line that names the old names on purpose
  # fanout_common -> fanout_kit.common (paths first, then the module name)
  s{lambdas/fanout_common\b}{fanout_kit/common}g;
  s{"lambdas"(\s*)/(\s*)"fanout_common"}{"fanout_kit"$1/$2"common"}g;  # Path pieces
  s{(?<![\w./-])fanout_common/}{fanout_kit/common/}g;
  s{(?<![\w./-])fanout_common\b}{fanout_kit.common}g;
  # statemachines (module names only; the statemachines/ folder stays where it is)
  s{(?<![\w./-])statemachines\.(?=[a-z_])}{fanout_kit.statemachines.}g;
  s{\b(from|import)\s+statemachines\b(?![./\w])}{$1 fanout_kit.statemachines}g;
  # fanout package -> fanout_kit (module names)
  s{(?<![\w./-])fanout\.($sub)\b}{fanout_kit.$1}g;
  s{(?<![\w./-])fanout\.pytest_plugin\b}{fanout_kit.pytest_plugin}g;
  s{(?<![\w./-])fanout\.cli\b}{fanout_kit.cli.main}g;
  s{(?<![\w./-])fanout\.($cli)\b}{fanout_kit.cli.$1}g;
  s{\bfrom\s+fanout\s+import\s+(?=(?:$cli)\b)}{from fanout_kit.cli import }g;
  s{\bfrom\s+fanout\s+import\s+(?=(?:$sub|pytest_plugin)\b)}{from fanout_kit import }g;
  s{(-m\s+)fanout\b(?![\w.])}{$1fanout_kit}g;
  s{("-m",\s*)"fanout"}{$1"fanout_kit"}g;
  # ... and their paths
  s{(?<![\w./-])fanout/($sub)\b}{fanout_kit/$1}g;
  s{(?<![\w./-])fanout/pytest_plugin\.py}{fanout_kit/pytest_plugin.py}g;
  s{(?<![\w./-])fanout/__main__\.py}{fanout_kit/__main__.py}g;
  s{(?<![\w./-])fanout/__init__\.py}{fanout_kit/cli/__init__.py}g;
  s{(?<![\w./-])fanout/cli\.py}{fanout_kit/cli/main.py}g;
  s{(?<![\w./-])fanout/($cli)\.py}{fanout_kit/cli/$1.py}g;
' $files
echo "namespace_move: moved and rewrote; now review git diff and git status" >&2
