#!/usr/bin/env python3
"""Validates generated Kubernetes manifests against the MPIJob CRD schema.

    validate.py CRD.yaml MANIFEST.yaml...

MPIJob documents are checked against the CRD's openAPIV3Schema (v2beta1);
batch/v1 Job documents' pod templates against the PodTemplateSpec schema
that the same CRD embeds (spec.mpiReplicaSpecs.*.template), and the Job and
its headless Service against the rules the coordinator bootstrap relies on
(Indexed completion, no retries, a Service selecting the Job's pods, the
rank count and token reaching the container). Exits 1 with the document,
path and message of every violation.
"""
import sys

import jsonschema
import yaml


def job_rules(job):
    spec = job.get("spec", {})
    if job.get("apiVersion") != "batch/v1":
        yield f"apiVersion {job.get('apiVersion')}, expected batch/v1"
    if spec.get("completionMode") != "Indexed":
        yield "spec.completionMode must be Indexed (ranks from JOB_COMPLETION_INDEX)"
    if spec.get("completions") != spec.get("parallelism"):
        yield "spec.completions and spec.parallelism differ: every rank must run at once"
    if spec.get("backoffLimit") != 0:
        yield "spec.backoffLimit must be 0 (the coordinator retries attempts)"
    pod = spec.get("template", {}).get("spec", {})
    if pod.get("restartPolicy") != "Never":
        yield "template.spec.restartPolicy must be Never"
    for c in pod.get("containers", []):
        names = {e.get("name") for e in c.get("env", [])}
        for needed in ("RINGMASTER_WORLD_SIZE", "RINGMASTER_TOKEN", "POD_IP"):
            if needed not in names:
                yield f"container {c.get('name')}: env {needed} missing"
        if "--bootstrap" not in c.get("args", []):
            yield f"container {c.get('name')}: args lack --bootstrap"
        for e in c.get("env", []):
            if e.get("name") == "RINGMASTER_TOKEN" and "value" in e:
                yield "RINGMASTER_TOKEN inline: it must come from a Secret"


def mpijob_rules(doc):
    """What mpi-operator needs to run the job with the shipped images: the
    launcher runs mpirun, every worker container runs sshd in the
    foreground (the launcher starts the ranks over ssh)."""
    specs = doc.get("spec", {}).get("mpiReplicaSpecs", {})
    for role in ("Launcher", "Worker"):
        if role not in specs:
            yield f"mpiReplicaSpecs.{role} missing"
    for role, spec in specs.items():
        for c in spec.get("template", {}).get("spec", {}).get("containers", []):
            command = c.get("command") or []
            if not command:
                yield f"{role} container {c.get('name')}: no command"
            elif role == "Worker" and not any("sshd" in a for a in command):
                yield (f"Worker container {c.get('name')}: command {command} "
                       "does not run sshd (the launcher reaches workers over ssh)")
            elif role == "Launcher" and command[0] != "mpirun":
                yield f"Launcher container {c.get('name')}: command is not mpirun"


SERVICES = {}


def service_rules(svc, path):
    spec = svc.get("spec", {})
    if svc.get("apiVersion") != "v1":
        yield f"apiVersion {svc.get('apiVersion')}, expected v1"
    if spec.get("clusterIP") != "None" and not spec.get("ports"):
        yield "spec.clusterIP None (headless) or ports expected"
    if not spec.get("selector"):
        yield "spec.selector missing"
    if spec.get("clusterIP") != "None":
        return
    SERVICES[(path, svc["metadata"]["name"])] = spec.get("selector", {})


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    crd = yaml.safe_load(open(sys.argv[1]))
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v2beta1")
    mpijob = version["schema"]["openAPIV3Schema"]
    pod_template = (mpijob["properties"]["spec"]["properties"]["mpiReplicaSpecs"]
                    ["additionalProperties"]["properties"]["template"])
    failures = checked = 0
    for path in sys.argv[2:]:
        for i, doc in enumerate(yaml.safe_load_all(open(path))):
            if doc is None:
                continue
            kind = doc.get("kind")
            if kind == "MPIJob":
                if doc.get("apiVersion") != "kubeflow.org/v2beta1":
                    print(f"{path}[{i}]: apiVersion {doc.get('apiVersion')}")
                    failures += 1
                schema, target = mpijob, doc
                for problem in mpijob_rules(doc):
                    print(f"{path}[{i}] MPIJob: {problem}")
                    failures += 1
            elif kind == "Job":
                schema, target = pod_template, doc["spec"]["template"]
                for problem in job_rules(doc):
                    print(f"{path}[{i}] Job: {problem}")
                    failures += 1
            elif kind == "Deployment":
                schema, target = pod_template, doc["spec"]["template"]
            elif kind == "Service":
                checked += 1
                for problem in service_rules(doc, path):
                    print(f"{path}[{i}] Service: {problem}")
                    failures += 1
                continue
            else:
                continue
            checked += 1
            validator = jsonschema.Draft7Validator(schema)
            for error in validator.iter_errors(target):
                where = "/".join(str(p) for p in error.absolute_path)
                print(f"{path}[{i}] {kind}: {where}: {error.message}")
                failures += 1
    # Each Job's pods are selected by the Service of the same name, whose
    # name is their subdomain.
    for path in sys.argv[2:]:
        for doc in yaml.safe_load_all(open(path)):
            if not doc or doc.get("kind") != "Job":
                continue
            name = doc["metadata"]["name"]
            selector = SERVICES.get((path, name))
            template = doc["spec"]["template"]
            labels = template.get("metadata", {}).get("labels", {})
            if selector is None:
                print(f"{path} Job {name}: no headless Service of that name")
                failures += 1
            elif any(labels.get(k) != v for k, v in selector.items()):
                print(f"{path} Job {name}: the Service does not select its pods")
                failures += 1
            if template.get("spec", {}).get("subdomain") != name:
                print(f"{path} Job {name}: template.spec.subdomain is not the Service")
                failures += 1
    print(f"validate.py: {checked} document(s), {failures} violation(s)")
    return 1 if failures or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
