#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The clouds' Python clients as a developer's program uses them, for the tests:

    cloud_clients.py boto3 PROFILE ENDPOINT   boto3 with the AWS profile: prints the caller's ARN.
    cloud_clients.py google-auth              google.auth.default()'s credentials, refreshed:
                                              prints the access token; an error on stderr, exit 1.
"""
import sys


def main():
    if sys.argv[1] == "boto3":
        import boto3
        session = boto3.Session(profile_name=sys.argv[2], region_name="us-east-1")
        print(session.client("sts", endpoint_url=sys.argv[3]).get_caller_identity()["Arn"])
    else:
        import google.auth
        import google.auth.transport.requests
        try:
            credentials, _ = google.auth.default()
            credentials.refresh(google.auth.transport.requests.Request())
        except Exception as error:
            print("%s: %s" % (type(error).__name__, error), file=sys.stderr)
            return 1
        print(credentials.token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
