"""Stand-in for the get-pip bootstrap script ansible-test downloads from a host this machine cannot reach.

ansible-test runs it inside each fresh sanity virtualenv with pip's options and the packages to install
(pip==X and friends). The same result from what is reachable: the stdlib's bundled pip (ensurepip), then
pip itself installs the requested versions from PyPI. `make sanity` copies it to ansible-test's cache.
"""
import subprocess
import sys

GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"],
                      stdout=subprocess.DEVNULL)
pip_arguments = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *pip_arguments])
