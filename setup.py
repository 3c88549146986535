"""Everything is declared in pyproject.toml; this adds one build step: the top-level `configs/` tree
(Hydra's config tree, which stays at the repository's top) is copied into the wheel as
`rlgym_llm/_configs`, where `rlgym_llm.config.compose.default_config_dir` finds it when the
package is installed without a checkout."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithConfigs(build_py):
    def run(self) -> None:
        super().run()
        source = Path(__file__).resolve().parent / "configs"
        target = Path(self.build_lib) / "rlgym_llm" / "_configs"
        shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithConfigs})
