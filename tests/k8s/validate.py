#!/usr/bin/env python3
"""Validates generated Kubernetes manifests against the MPIJob CRD schema.

    validate.py CRD.yaml MANIFEST.yaml...

MPIJob documents are checked against the CRD's openAPIV3Schema (v2beta1);
batch/v1 Job documents' pod templates against the PodTemplateSpec schema
that the same CRD embeds (spec.mpiReplicaSpecs.*.template). Exits 1 with the
document, path and message of every violation.
"""
import sys

import jsonschema
import yaml


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
            elif kind == "Job":
                schema, target = pod_template, doc["spec"]["template"]
            else:
                continue
            checked += 1
            validator = jsonschema.Draft7Validator(schema)
            for error in validator.iter_errors(target):
                where = "/".join(str(p) for p in error.absolute_path)
                print(f"{path}[{i}] {kind}: {where}: {error.message}")
                failures += 1
    print(f"validate.py: {checked} document(s), {failures} violation(s)")
    return 1 if failures or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
