"""The container images of deploy/container, checked without building them
(a full image build compiles the project and, for the worker, downloads
PyTorch: deploy/README.md says how they were built): every file they copy is
in the repository and not kept out by .dockerignore, the binaries they build
and copy are CMake targets of this project, the base images are build
arguments (a registry mirror can stand in), the entrypoint's flags are ones
the binary accepts, and the ports they expose are the ones the Kubernetes
manifests use.

  check_containers.py --kubectl KUBECTL --binary NAME=PATH ... [unittest args]
"""

import argparse
import glob
import os
import re
import sys
import unittest

import deploy_files as df

ARGS = None
CONTAINER = os.path.join(df.DEPLOY, "container")


def dockerfiles():
    found = sorted(glob.glob(os.path.join(CONTAINER, "*.Dockerfile")))
    if not found:
        raise AssertionError(f"no *.Dockerfile in {CONTAINER}")
    return found


def image_of(dockerfile):
    """deploy/container/worker.Dockerfile builds autoaccel-worker."""
    return "autoaccel-" + os.path.basename(dockerfile)[: -len(".Dockerfile")]


def stages(instructions):
    """[(stage name or index, [instructions])] split at FROM."""
    out = []
    for ins in instructions:
        if ins.keyword == "FROM":
            words = ins.text.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(out))
            out.append((name, [ins]))
        elif out:
            out[-1][1].append(ins)
    return out


class Dockerfiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = {path: df.parse_dockerfile(path) for path in dockerfiles()}
        cls.rendered = df.kustomize(ARGS.kubectl, os.path.join(df.DEPLOY, "kubernetes"))

    def test_base_images_are_build_arguments_with_defaults(self):
        for path, instructions in self.files.items():
            args = {}
            for ins in instructions:
                if ins.keyword == "ARG":
                    name, _, default = ins.text.partition("=")
                    args[name.strip()] = default.strip()
            names = [n for n, _ in stages(instructions)]
            for ins in instructions:
                if ins.keyword != "FROM":
                    continue
                image = ins.text.split()[0]
                with self.subTest(file=os.path.basename(path), line=ins.line):
                    if image in names:
                        continue
                    m = re.fullmatch(r"\$\{?(\w+)\}?", image)
                    self.assertIsNotNone(m, f"FROM {image}: name the base image with an ARG")
                    self.assertTrue(args.get(m.group(1)), f"ARG {m.group(1)} has no default")

    def test_every_file_copied_from_the_repository_exists_and_is_in_the_build_context(self):
        patterns = df.dockerignore_patterns()
        for path, instructions in self.files.items():
            for ins in instructions:
                if ins.keyword not in ("COPY", "ADD"):
                    continue
                options, words = ins.options_and_args()
                if "from" in options:
                    continue
                for src in words[:-1]:
                    with self.subTest(file=os.path.basename(path), line=ins.line, src=src):
                        rel = os.path.normpath(src)
                        self.assertFalse(rel.startswith(".."), f"{src} is outside the repository")
                        self.assertTrue(os.path.exists(os.path.join(df.REPO, rel)), f"{src} does not exist")
                        self.assertFalse(df.ignored(rel, patterns), f"{src} is excluded by .dockerignore")

    def test_binaries_built_and_copied_are_cmake_targets(self):
        for path, instructions in self.files.items():
            built = {}
            for name, body in stages(instructions):
                for ins in body:
                    for m in re.finditer(r"--target((?:\s+[\w-]+)+)", ins.text):
                        built.setdefault(name, set()).update(m.group(1).split())
            self.assertTrue(built, f"{path}: builds no CMake target")
            for targets in built.values():
                for t in targets:
                    self.assertIn(t, ARGS.binaries, f"{os.path.basename(path)}: --target {t} is not a "
                                  f"binary target of this project")
            for ins in instructions:
                if ins.keyword != "COPY":
                    continue
                options, words = ins.options_and_args()
                for src in words[:-1]:
                    m = re.search(r"/build/bin/([\w-]+)$", src)
                    if m and "from" in options:
                        with self.subTest(file=os.path.basename(path), line=ins.line, src=src):
                            self.assertIn(m.group(1), built.get(options["from"], set()),
                                          f"{src}: stage {options['from']} does not build it")

    def test_the_entrypoint_is_a_copied_binary_and_accepts_the_default_flags(self):
        for path, instructions in self.files.items():
            final = stages(instructions)[-1][1]
            entry = [i for i in final if i.keyword == "ENTRYPOINT"]
            cmd = [i for i in final if i.keyword == "CMD"]
            self.assertEqual(len(entry), 1, f"{path}: one ENTRYPOINT")
            binary = entry[0].json_or_words()[0]
            copied = set()
            for ins in final:
                if ins.keyword == "COPY":
                    copied.update(os.path.basename(w) for w in ins.options_and_args()[1][:-1])
            self.assertIn(binary, copied, f"{path}: ENTRYPOINT {binary} is not copied into the image")
            accepted = df.help_flags(ARGS.binaries[binary])
            for flag in df.flags_in(cmd[0].json_or_words() if cmd else []):
                with self.subTest(file=os.path.basename(path), flag=flag):
                    self.assertIn(flag, accepted, f"{binary} does not accept {flag}")

    # The -dev packages of scripts/setup an image's build does not need, and why.
    NOT_BUILT_FROM = {
        "coordinator": {"libgtest-dev": "tests are off", "libgmock-dev": "tests are off",
                        "libfuzzer-14-dev": "fuzz targets are tests",
                        "libgloo-dev": "the trial runner is not built"},
        "worker": {"libgtest-dev": "tests are off", "libgmock-dev": "tests are off",
                   "libfuzzer-14-dev": "fuzz targets are tests"},
    }

    def test_the_build_stage_installs_the_dev_packages_scripts_setup_does(self):
        with open(os.path.join(df.REPO, "scripts", "setup")) as f:
            setup = f.read()
        dev = set()
        for m in re.finditer(r"APT_PACKAGES\+?=\(([^)]*)\)", setup):
            text = re.sub(r"#.*", "", m.group(1))
            dev.update(w for w in text.split() if w.endswith("-dev"))
        self.assertIn("libgrpc++-dev", dev, "could not read scripts/setup's APT_PACKAGES")
        for path, instructions in self.files.items():
            build = stages(instructions)[0][1]
            installed = set(" ".join(i.text for i in build if i.keyword == "RUN").split())
            skip = self.NOT_BUILT_FROM[os.path.basename(path)[: -len(".Dockerfile")]]
            for package in sorted(dev - set(skip)):
                with self.subTest(file=os.path.basename(path), package=package):
                    self.assertIn(package, installed, f"scripts/setup installs {package}; the image's "
                                  "build stage does not (or add it to NOT_BUILT_FROM with why)")

    def test_the_trial_runner_sits_next_to_the_worker(self):
        worker = os.path.join(CONTAINER, "worker.Dockerfile")
        final = stages(self.files[worker])[-1][1]
        dirs = {}
        for ins in final:
            if ins.keyword == "COPY":
                words = ins.options_and_args()[1]
                for src in words[:-1]:
                    dirs[os.path.basename(src)] = words[-1].rstrip("/")
        self.assertEqual(dirs.get("autoaccel-trial"), dirs.get("autoaccel-worker"))
        env = " ".join(i.text for i in final if i.keyword == "ENV")
        self.assertIn(dirs["autoaccel-worker"], env, "the worker's directory is not on PATH")

    def test_the_coordinator_runs_unprivileged_with_its_database_on_a_volume(self):
        path = os.path.join(CONTAINER, "coordinator.Dockerfile")
        final = stages(self.files[path])[-1][1]
        user = [i.text for i in final if i.keyword == "USER"]
        self.assertTrue(user and user[-1].split(":")[0] not in ("0", "root"), user)
        volumes = [v for i in final if i.keyword == "VOLUME" for v in i.json_or_words()]
        cmd = [i for i in final if i.keyword == "CMD"][0].json_or_words()
        db = cmd[cmd.index("--db") + 1]
        self.assertTrue(any(db.startswith(v.rstrip("/") + "/") for v in volumes), (db, volumes))

    def test_exposed_ports_are_the_ports_the_manifests_use(self):
        for path, instructions in self.files.items():
            image = image_of(path)
            exposed = [df.parse_port_range(p.split("/")[0])
                       for i in stages(instructions)[-1][1] if i.keyword == "EXPOSE"
                       for p in i.text.split()]
            used = set()
            for obj in self.rendered:
                spec = df.pod_spec(obj)
                for c in (spec or {}).get("containers", []):
                    if df.image_base(c["image"]) != image:
                        continue
                    used.update(p["containerPort"] for p in c.get("ports", []))
                    for w in c.get("args", []):
                        if w.startswith("--rendezvous-ports="):
                            lo, hi = df.parse_port_range(w.split("=", 1)[1])
                            used.update((lo, hi))
            with self.subTest(image=image):
                self.assertTrue(used, f"no manifest runs {image}")
                for port in used:
                    self.assertTrue(any(lo <= port <= hi for lo, hi in exposed),
                                    f"{image}: the manifests use port {port}, the image exposes {exposed}")
                for lo, hi in exposed:
                    self.assertTrue(any(lo <= p <= hi for p in used),
                                    f"{image}: exposes {lo}-{hi}, which no manifest uses")


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubectl", required=True)
    parser.add_argument("--binary", action="append", default=[], help="NAME=PATH")
    ARGS, rest = parser.parse_known_args()
    ARGS.binaries = dict(b.split("=", 1) for b in ARGS.binary)
    df.require_kubectl(ARGS.kubectl)
    unittest.main(argv=[sys.argv[0], "-v"] + rest)


if __name__ == "__main__":
    main()
