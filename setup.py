"""Install ingraph_rl. The primary install path (Bazel is described in BUILD).

`make venv` installs the exact pins of requirements.txt first; the ranges
below are what the package supports.
"""

import setuptools

setuptools.setup(
    name="ingraph_rl",
    version="0.1.0",
    description="Reinforcement learning where every part runs in the "
                "TensorFlow graph",
    packages=setuptools.find_packages(include=["ingraph_rl", "ingraph_rl.*"]),
    python_requires=">=3.10",
    install_requires=[
        "tensorflow-cpu>=2.21,<2.22",
        "tensorflow-probability>=0.25,<0.26",
        "numpy>=1.26,<3",
        "dm-tree>=0.1.8",
        "gymnasium>=1.0,<2",
        "absl-py>=2.0",
    ],
    extras_require={
        # Ask for the CPU build explicitly (see requirements.txt).
        "torch": ["torch==2.13.0"],
        "atari": ["ale-py>=0.10", "opencv-python-headless>=4.8"],
        "test": ["pytest>=8", "pytest-timeout", "hypothesis>=6"],
    },
)
