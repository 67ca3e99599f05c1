"""Code shared by every Lambda of the kit (bundled with each function's asset).

Keep these modules free of imports of each other's package name at module level where the
CDK app imports them (``errors`` is imported by the app to name the Retry/Catch error types),
and free of third-party imports except boto3 and Powertools, which the Lambda runtime and the
Powertools layer provide.
"""
