"""The Kubernetes manifests of deploy/kubernetes: they render with kubectl's
kustomize (the base, with its host-network component, and the CLI Job), every
object matches the Kubernetes API's schema (the Python kubernetes client's
models, no cluster needed), and they wire what a running deployment needs:
probes on the coordinator's HTTP port, the database on the persistent volume,
secrets where the flags read them, GPUs matching --devices, flags the binaries
accept.

  check_kubernetes.py --kubectl KUBECTL --binary NAME=PATH ... [unittest args]
"""

import argparse
import copy
import os
import re
import shutil
import sys
import tempfile
import unittest

import deploy_files as df
import k8s_schema

ARGS = None
BASE = os.path.join(df.DEPLOY, "kubernetes")
CLI = os.path.join(BASE, "cli")


def containers(obj):
    return df.pod_spec(obj)["containers"]


def one(objects, kind, name):
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    if len(found) != 1:
        raise AssertionError(f"expected one {kind} {name}, rendered {len(found)}")
    return found[0]


def flag_value(words, flag):
    """The value of --flag=V or --flag V among words (None if absent)."""
    for i, w in enumerate(words):
        if w.startswith(flag + "="):
            return w[len(flag) + 1:]
        if w == flag and i + 1 < len(words):
            return words[i + 1]
    return None


def mount_for(container, volumes, path):
    """(volume mount, volume) holding the file at path in the container."""
    best = None
    for m in container.get("volumeMounts", []):
        root = m["mountPath"].rstrip("/") + "/"
        if path.startswith(root) and (best is None or len(root) > len(best["mountPath"])):
            best = m
    if best is None:
        return None, None
    return best, next(v for v in volumes if v["name"] == best["name"])


# The files deploy/tls/make-certs and make-tokens write, which the Secrets hold.
def made_by_tls_scripts(name):
    return (name in ("ca.pem", "tokens", "join-token", "token")
            or re.fullmatch(r"[A-Za-z0-9._-]+\.(pem|key|token)", name) is not None)


class RenderedManifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.base = df.kustomize(ARGS.kubectl, BASE)
        cls.cli = df.kustomize(ARGS.kubectl, CLI)
        # The host-network component switched on, as its comment tells users to.
        tmp = tempfile.mkdtemp(prefix="autoaccel-kustomize-")
        try:
            copy_dir = os.path.join(tmp, "kubernetes")
            shutil.copytree(BASE, copy_dir)
            path = os.path.join(copy_dir, "kustomization.yaml")
            with open(path) as f:
                text = f.read()
            on = text.replace("# components:\n#   - components/host-network",
                              "components:\n  - components/host-network")
            if on == text:
                raise AssertionError("kustomization.yaml lost its commented host-network component")
            with open(path, "w") as f:
                f.write(on)
            cls.host_network, cls.no_components = [], None
            try:
                cls.host_network = df.kustomize(ARGS.kubectl, copy_dir)
            except RuntimeError as e:
                # kustomize learnt components in v3.7 (kubectl 1.21); Debian 12's
                # kubectl is 1.20.
                if 'unknown field "components"' not in str(e):
                    raise
                cls.no_components = f"{ARGS.kubectl} is too old for kustomize components (needs 1.21+)"
        finally:
            shutil.rmtree(tmp)
        cls.helps = {}

    def flags_of(self, binary, *sub):
        key = (binary,) + sub
        if key not in self.helps:
            if binary not in ARGS.binaries:
                self.fail(f"{binary}: not a binary this build made (known: {sorted(ARGS.binaries)})")
            flags = df.help_flags(ARGS.binaries[binary])
            if sub:
                flags |= df.help_flags(ARGS.binaries[binary], *sub)
            self.helps[key] = flags
        return self.helps[key]

    def test_every_object_matches_the_api_schema(self):
        for objects in (self.base, self.cli, self.host_network):
            for obj in objects:
                with self.subTest(kind=obj["kind"], name=obj["metadata"]["name"]):
                    self.assertEqual(k8s_schema.errors_of(obj), [])

    def test_the_schema_check_refuses_a_misspelled_or_mistyped_field(self):
        sts = one(self.base, "StatefulSet", "autoaccel-coordinator")
        typo = copy.deepcopy(sts)
        c = containers(typo)[0]
        c["livenesProbe"] = c.pop("livenessProbe")
        self.assertIn("unknown field 'livenesProbe'", "\n".join(k8s_schema.errors_of(typo)))
        wrong_type = copy.deepcopy(sts)
        wrong_type["spec"]["replicas"] = "1"
        self.assertIn("spec.replicas: expected an integer", "\n".join(k8s_schema.errors_of(wrong_type)))
        missing = copy.deepcopy(sts)
        del containers(missing)[0]["image"], containers(missing)[0]["name"]
        self.assertNotEqual(k8s_schema.errors_of(missing), [])

    def test_everything_lands_in_one_namespace(self):
        for obj in self.base + self.cli:
            if obj["kind"] != "Namespace":
                self.assertEqual(obj["metadata"].get("namespace"), "autoaccel", obj["metadata"]["name"])

    def test_the_coordinator_is_one_stateful_replica_with_its_database_on_a_claimed_volume(self):
        sts = one(self.base, "StatefulSet", "autoaccel-coordinator")
        self.assertEqual(sts["spec"]["replicas"], 1)
        c = containers(sts)[0]
        db = flag_value(c["args"], "--db")
        self.assertIsNotNone(db, "the coordinator has no --db")
        mount, volume = mount_for(c, df.pod_spec(sts).get("volumes", []) + [
            {"name": t["metadata"]["name"], "claim": True} for t in sts["spec"]["volumeClaimTemplates"]
        ], db)
        self.assertIsNotNone(mount, f"--db {db} is on no volume")
        self.assertTrue(volume.get("claim"), f"--db {db} is on {volume}, not a volumeClaimTemplate")
        self.assertEqual(sts["spec"]["volumeClaimTemplates"][0]["spec"]["accessModes"], ["ReadWriteOnce"])

    def test_probes_and_prometheus_scrape_hit_the_http_port(self):
        sts = one(self.base, "StatefulSet", "autoaccel-coordinator")
        c = containers(sts)[0]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        http_listen = flag_value(c["args"], "--http-listen")
        self.assertIsNotNone(http_listen, "the coordinator serves no --http-listen")
        self.assertEqual(int(http_listen.rsplit(":", 1)[1]), ports["http"])
        self.assertEqual(int(flag_value(c["args"], "--listen").rsplit(":", 1)[1]), ports["grpc"])
        self.assertEqual(c["livenessProbe"]["httpGet"],
                         {"path": "/healthz", "port": "http", "scheme": "HTTPS"})
        self.assertEqual(c["readinessProbe"]["httpGet"],
                         {"path": "/readyz", "port": "http", "scheme": "HTTPS"})
        annotations = sts["spec"]["template"]["metadata"]["annotations"]
        self.assertEqual(annotations["prometheus.io/scrape"], "true")
        self.assertEqual(int(annotations["prometheus.io/port"]), ports["http"])
        self.assertEqual(annotations["prometheus.io/path"], "/metrics")

    def test_the_coordinator_service_selects_its_pod_on_both_ports(self):
        sts = one(self.base, "StatefulSet", "autoaccel-coordinator")
        svc = one(self.base, "Service", "autoaccel-coordinator")
        labels = sts["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(svc["spec"]["selector"].items() <= labels.items())
        self.assertEqual({p["name"]: p["targetPort"] for p in svc["spec"]["ports"]},
                         {"grpc": "grpc", "http": "http"})
        self.assertEqual(sts["spec"]["serviceName"], svc["metadata"]["name"])

    def test_every_file_a_flag_names_is_mounted_from_a_secret_or_config_map_that_has_it(self):
        config_maps = {o["metadata"]["name"]: o for o in self.base + self.cli if o["kind"] == "ConfigMap"}
        file_flags = ("--tls-cert", "--tls-key", "--tls-ca", "--tokens", "--join-token-file",
                      "--http-tls-cert", "--http-tls-key",
                      "--launchers", "--model-config")
        for obj in self.base + self.cli:
            spec = df.pod_spec(obj)
            if spec is None:
                continue
            for c in spec["containers"]:
                words = c.get("command", []) + c.get("args", [])
                paths = [flag_value(words, f) for f in file_flags]
                paths += [e["value"] for e in c.get("env", [])
                          if e["name"] in ("AUTOACCEL_TLS_CA", "AUTOACCEL_TOKEN_FILE")]
                for path in filter(None, paths):
                    with self.subTest(pod=obj["metadata"]["name"], path=path):
                        mount, volume = mount_for(c, spec.get("volumes", []), path)
                        self.assertIsNotNone(mount, f"{path} is on no volume")
                        key = os.path.relpath(path, mount["mountPath"])
                        if "secret" in volume:
                            items = volume["secret"].get("items")
                            if items:
                                self.assertIn(key, [i["path"] for i in items])
                                key = next(i["key"] for i in items if i["path"] == key)
                            self.assertTrue(made_by_tls_scripts(key),
                                            f"{key}: not a file deploy/tls/make-certs or make-tokens writes")
                        elif "configMap" in volume:
                            cm = config_maps.get(volume["configMap"]["name"])
                            self.assertIsNotNone(cm, f"ConfigMap {volume['configMap']['name']} is not rendered")
                            self.assertIn(key, cm["data"])
                        else:
                            self.fail(f"{path} is on volume {volume}, neither a Secret nor a ConfigMap")

    def test_secret_volumes_are_mounted_read_only(self):
        for obj in self.base + self.cli:
            spec = df.pod_spec(obj)
            if spec is None:
                continue
            secrets = {v["name"] for v in spec.get("volumes", []) if "secret" in v}
            for c in spec["containers"]:
                for m in c.get("volumeMounts", []):
                    if m["name"] in secrets:
                        self.assertTrue(m.get("readOnly"), f"{obj['metadata']['name']}: {m}")

    def test_workers_hold_as_many_gpus_as_they_offer_devices(self):
        ds = one(self.base, "DaemonSet", "autoaccel-worker")
        c = containers(ds)[0]
        devices = flag_value(c["args"], "--devices")
        self.assertTrue(devices and devices.startswith("cuda:"), devices)
        count = 0
        for part in devices[len("cuda:"):].split(","):
            lo, hi = df.parse_port_range(part)
            count += hi - lo + 1
        self.assertEqual(int(c["resources"]["limits"]["nvidia.com/gpu"]), count)
        spec = df.pod_spec(ds)
        self.assertIn("nvidia.com/gpu.present", spec["nodeSelector"])
        self.assertIn("nvidia.com/gpu", [t["key"] for t in spec["tolerations"]])

    def test_workers_advertise_their_pod_address_and_reach_the_coordinator_service(self):
        ds = one(self.base, "DaemonSet", "autoaccel-worker")
        c = containers(ds)[0]
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP")
        script = " ".join(c["command"])
        self.assertRegex(script, r'--advertise-host "\$\(echo "\$POD_IP" \| tr \. -\)\.autoaccel-worker\.')
        headless = one(self.base, "Service", "autoaccel-worker")
        self.assertEqual(headless["spec"]["clusterIP"], "None")
        self.assertTrue(headless["spec"]["publishNotReadyAddresses"])
        listen_port = int(flag_value(c["args"], "--listen").rsplit(":", 1)[1])
        self.assertEqual({p["name"]: p["containerPort"] for p in c["ports"]}, {"grpc": listen_port})
        self.assertEqual(headless["spec"]["ports"][0]["port"], listen_port)
        host, port = flag_value(c["args"], "--coordinator").rsplit(":", 1)
        svc = one(self.base, "Service", host)
        self.assertIn(int(port), [p["port"] for p in svc["spec"]["ports"] if p["name"] == "grpc"])

    def test_the_worker_may_build_its_trial_sandbox(self):
        ds = one(self.base, "DaemonSet", "autoaccel-worker")
        c = containers(ds)[0]
        sc = c["securityContext"]
        self.assertEqual(sc["runAsUser"], 0)
        self.assertIn("SYS_ADMIN", sc["capabilities"]["add"])
        self.assertNotIn("--no-sandbox", c["args"])
        self.assertFalse(sc.get("privileged", False), "privileged shows the pod every GPU of the node")
        # The API server's own rule (ValidateSecurityContext), which no schema shows.
        self.assertIsNot(sc.get("allowPrivilegeEscalation"), False,
                         "the API refuses allowPrivilegeEscalation: false with SYS_ADMIN")
        annotations = ds["spec"]["template"]["metadata"]["annotations"]
        self.assertEqual(annotations["container.apparmor.security.beta.kubernetes.io/" + c["name"]],
                         "unconfined")

    def test_the_launchers_config_map_is_the_generated_one(self):
        ds = one(self.base, "DaemonSet", "autoaccel-worker")
        names = [v["configMap"]["name"] for v in df.pod_spec(ds)["volumes"] if "configMap" in v]
        generated = [o["metadata"]["name"] for o in self.base if o["kind"] == "ConfigMap"]
        self.assertEqual(len(names), 1)
        self.assertIn(names[0], generated)
        self.assertTrue(names[0].startswith("autoaccel-launchers-"))

    def test_the_host_network_component_moves_only_the_workers(self):
        if self.no_components:
            self.skipTest(self.no_components)
        ds = one(self.host_network, "DaemonSet", "autoaccel-worker")
        self.assertTrue(df.pod_spec(ds)["hostNetwork"])
        self.assertEqual(df.pod_spec(ds)["dnsPolicy"], "ClusterFirstWithHostNet")
        sts = one(self.host_network, "StatefulSet", "autoaccel-coordinator")
        self.assertNotIn("hostNetwork", df.pod_spec(sts))
        self.assertNotIn("hostNetwork", df.pod_spec(one(self.base, "DaemonSet", "autoaccel-worker")))

    def test_every_flag_in_a_container_command_is_one_its_binary_accepts(self):
        for obj in self.base + self.cli:
            spec = df.pod_spec(obj)
            if spec is None:
                continue
            for c in spec["containers"]:
                image = df.image_base(c["image"])
                words = c.get("command", []) + c.get("args", [])
                if c.get("command", [None])[0] == "/bin/sh":
                    # sh -c 'exec BINARY ...' NAME ARGS...
                    binary = re.search(r"exec (\S+)", c["command"][2]).group(1)
                    sub = ()
                elif c.get("command"):
                    binary = c["command"][0]
                    sub = tuple(w for w in c.get("args", [])[:1] if not w.startswith("-"))
                else:
                    binary = {"autoaccel-coordinator": "autoaccel-server",
                              "autoaccel-worker": "autoaccel-worker"}[image]
                    sub = ()
                accepted = self.flags_of(binary, *sub)
                for flag in df.flags_in(words):
                    with self.subTest(pod=obj["metadata"]["name"], binary=binary, flag=flag):
                        self.assertIn(flag, accepted, f"{binary} {' '.join(sub)} does not accept {flag}")


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
