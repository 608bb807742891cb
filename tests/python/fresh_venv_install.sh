#!/bin/sh
# fresh_venv_install.sh PYTHON VENV PACKAGE_DIR
#
# What a user does to get the client: a new virtual environment VENV, made
# by PYTHON with none of its packages (no --system-site-packages), and
# `pip install PACKAGE_DIR` (grpcio and protobuf from PyPI, or pip's cache);
# then `from autoaccel import Client` in it. VENV is replaced.
set -eu
python=$1 venv=$2 package=$3
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$package"
"$venv/bin/python" -c "from autoaccel import Client; print('installed', Client)"
