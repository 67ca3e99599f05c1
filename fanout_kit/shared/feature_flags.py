"""The CDK feature flags the kit's constructs rely on, pinned on each construct so that it
synthesizes the same state machines and IAM policies in any app, whatever the app's cdk.json says.

CDK reads a flag with ``FeatureFlags.of(scope).isEnabled(flag)``, which is
``scope.node.tryGetContext(flag)``: the nearest value from the scope up to the app. A value set on
the construct's own node (``node.set_context``, before its first child exists) therefore wins over
the app's for every resource created inside the construct.
(https://docs.aws.amazon.com/cdk/v2/guide/featureflags.html; aws-cdk-lib core/lib/feature-flags.ts)

Every flag of this repository's cdk.json is classified in ``FLAGS`` (tests/test_feature_flags.py
keeps the list complete and proves each entry):

* ``PIN``: changes what a construct synthesizes (its state machine, its IAM policies, its own
  resources); the construct sets it to ``value``.
* ``POLICY_FORM``: read at the stack level, so it cannot be pinned, and changes only the form of
  the kit's IAM policies (statement order and merging), never a permission: accepted.
* ``PARTITION_FORM``: read by ``Stack.partition`` at the stack level, so it cannot be pinned; with
  a region known at synth, ARNs carry that region's partition literally (``aws``) instead of
  ``{"Ref": "AWS::Partition"}``, which CloudFormation resolves to the same value: accepted (proven by
  comparing the templates with the partition resolved).
* ``APP_ONLY``: changes only resources the app creates itself (its own functions' log groups), never
  the kit's; left to the app.
* ``NO_EFFECT``: changes nothing the constructs synthesize (the flag concerns a service or a feature
  the kit does not use; proven by synthesizing all three constructs with and without it).

A flag that the kit relies on but cannot pin (read at the stack or app level) would be refused at
synth with a ConfigError naming the flag and the fix (``check_stack_flags``); none of this
repository's flags is such a one today (STACK_LEVEL is empty, and the test says so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from constructs import Construct

from fanout_kit.shared.checks import ConfigError

PIN, POLICY_FORM, APP_ONLY, NO_EFFECT = "pin", "policy-form", "app-only", "no-effect"
PARTITION_FORM = "partition-form"


@dataclass(frozen=True)
class Flag:
    value: object  # the value in this repository's cdk.json (and the one pinned)
    handling: str  # PIN, POLICY_FORM, PARTITION_FORM, APP_ONLY or NO_EFFECT
    why: str = ""


_PINNED = {
    "@aws-cdk/aws-stepfunctions:useDistributedMapResultWriterV2": Flag(
        True, PIN, "DistributedMapFanOut: without it the Map has no ResultWriter (its results are not written, "
        "ReadMapRun finds no $.mapRun.MapRunArn and every batch ends FAILED) and the role lacks the bucket grants"),
    "@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy": Flag(
        True, PIN, "all three: the kit's functions' extra grants (Function.add_to_role_policy) go to a policy of "
        "their own under the function, where the kit's cdk-nag acknowledgements are; without it they merge into "
        "the role's default policy and synth fails with unacknowledged findings"),
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": Flag(
        True, PIN, "DistributedMapFanOut: the access-log bucket is written through a bucket policy (the "
        "log-delivery ACL otherwise, which S3 disables by default since 2023)"),
}

_POLICY_FORM = {
    "@aws-cdk/aws-iam:minimizePolicies": Flag(
        True, POLICY_FORM, "read when the stack resolves its template (the stack's value, not the "
        "construct's: it cannot be pinned); it sorts and merges the statements of the kit's policies, the "
        "permissions stay the same (proven action by action, resource by resource)"),
}

_PARTITION_FORM = {
    "@aws-cdk/core:enablePartitionLiterals": Flag(
        False, PARTITION_FORM, "read by Stack.partition (the stack's value: it cannot be pinned); in a stack with "
        "a region, true writes that region's partition literally in the kit's ARNs instead of a Ref to "
        "AWS::Partition: the same values once deployed (proven with the partition resolved)"),
}

_APP_ONLY = {
    "@aws-cdk/aws-lambda:useCdkManagedLogGroup": Flag(
        True, APP_ONLY, "creates a log group for a function built without one: the kit's functions have their "
        "own (KitFunction); only the app's functions change"),
}

_NO_EFFECT_FLAGS = {
    "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
    "@aws-cdk/core:checkSecretUsage": True,
    "@aws-cdk/core:target-partitions": ["aws", "aws-cn"],
    "@aws-cdk/core:validateSnapshotRemovalPolicy": True,
    "@aws-cdk/aws-stepfunctions-tasks:useNewS3UriParametersForBedrockInvokeModelTask": True,
    "@aws-cdk/aws-stepfunctions-tasks:fixRunEcsTaskPolicy": True,
    "@aws-cdk/aws-dynamodb:resourcePolicyPerReplica": True,
    "@aws-cdk/core:enableAdditionalMetadataCollection": False,
    "@aws-cdk-containers/ecs-service-extensions:enableDefaultLogDriver": True,
    "@aws-cdk/aws-apigateway:authorizerChangeDeploymentLogicalId": True,
    "@aws-cdk/aws-apigateway:disableCloudWatchRole": True,
    "@aws-cdk/aws-apigateway:logGroupDestinationArnWithoutWildcard": True,
    "@aws-cdk/aws-apigateway:requestValidatorUniqueId": True,
    "@aws-cdk/aws-appsync:appSyncGraphQLAPIScopeLambdaPermission": True,
    "@aws-cdk/aws-appsync:useArnForSourceApiAssociationIdentifier": True,
    "@aws-cdk/aws-autoscaling:generateLaunchTemplateInsteadOfLaunchConfig": True,
    "@aws-cdk/aws-batch:defaultToAL2023": True,
    "@aws-cdk/aws-cloudfront:defaultFunctionRuntimeV2_0": True,
    "@aws-cdk/aws-cloudfront:defaultViewerProtocolPolicyRedirectToHttps": True,
    "@aws-cdk/aws-cloudwatch-actions:changeLambdaPermissionLogicalIdForLambdaAction": True,
    "@aws-cdk/aws-codedeploy:removeAlarmsFromDeploymentGroup": True,
    "@aws-cdk/aws-codepipeline-actions:useNewDefaultBranchForCodeCommitSource": True,
    "@aws-cdk/aws-codepipeline:crossAccountKeyAliasStackSafeResourceName": True,
    "@aws-cdk/aws-codepipeline:crossAccountKeysDefaultValueToFalse": True,
    "@aws-cdk/aws-codepipeline:defaultPipelineTypeToV2": True,
    "@aws-cdk/aws-dynamodb:retainTableReplica": True,
    "@aws-cdk/aws-ec2:bastionHostUseAmazonLinux2023ByDefault": True,
    "@aws-cdk/aws-ec2:ebsDefaultGp3Volume": True,
    "@aws-cdk/aws-ec2:ec2SumTImeoutEnabled": True,
    "@aws-cdk/aws-ec2:launchTemplateDefaultUserData": True,
    "@aws-cdk/aws-ec2:requirePrivateSubnetsForEgressOnlyInternetGateway": True,
    "@aws-cdk/aws-ec2:restrictDefaultSecurityGroup": True,
    "@aws-cdk/aws-ec2:uniqueImdsv2TemplateName": True,
    "@aws-cdk/aws-ecs-patterns:secGroupsDisablesImplicitOpenListener": True,
    "@aws-cdk/aws-ecs-patterns:uniqueTargetGroupId": True,
    "@aws-cdk/aws-ecs:arnFormatIncludesClusterName": True,
    "@aws-cdk/aws-ecs:disableExplicitDeploymentControllerForCircuitBreaker": True,
    "@aws-cdk/aws-ecs:reduceEc2FargateCloudWatchPermissions": True,
    "@aws-cdk/aws-ecs:removeDefaultDeploymentAlarm": True,
    "@aws-cdk/aws-ecs:removeEmptyLoadBalancers": True,
    "@aws-cdk/aws-efs:denyAnonymousAccess": True,
    "@aws-cdk/aws-efs:mountTargetOrderInsensitiveLogicalId": True,
    "@aws-cdk/aws-eks:defaultToAL2023": True,
    "@aws-cdk/aws-eks:nodegroupNameAttribute": True,
    "@aws-cdk/aws-eks:useNativeOidcProvider": True,
    "@aws-cdk/aws-elasticloadbalancingV2:albDualstackWithoutPublicIpv4SecurityGroupRulesDefault": True,
    "@aws-cdk/aws-elasticloadbalancingv2:networkLoadBalancerWithSecurityGroupByDefault": True,
    "@aws-cdk/aws-elasticloadbalancingv2:usePostQuantumTlsPolicy": True,
    "@aws-cdk/aws-events:eventsTargetQueueSameAccount": True,
    "@aws-cdk/aws-events:requireEventBusPolicySid": True,
    "@aws-cdk/aws-iam:importedRoleStackSafeDefaultPolicyName": True,
    "@aws-cdk/aws-iam:oidcRejectUnauthorizedConnections": True,
    "@aws-cdk/aws-kms:aliasNameRef": True,
    "@aws-cdk/aws-kms:applyImportedAliasPermissionsToPrincipal": True,
    "@aws-cdk/aws-kms:reduceCrossAccountRegionPolicyScope": True,
    "@aws-cdk/aws-lambda-nodejs:sdkV3ExcludeSmithyPackages": True,
    "@aws-cdk/aws-lambda-nodejs:useLatestRuntimeVersion": True,
    "@aws-cdk/aws-opensearchservice:enableOpensearchMultiAzWithStandby": True,
    "@aws-cdk/aws-rds:auroraClusterChangeScopeOfInstanceParameterGroupWithEachParameters": True,
    "@aws-cdk/aws-rds:databaseProxyUniqueResourceName": True,
    "@aws-cdk/aws-rds:preventRenderingDeprecatedCredentials": True,
    "@aws-cdk/aws-rds:setCorrectValueForDatabaseInstanceReadReplicaInstanceResourceId": True,
    "@aws-cdk/aws-redshift:columnId": True,
    "@aws-cdk/aws-route53-patterns:useDistribution": True,
    "@aws-cdk/aws-route53-patters:useCertificate": True,
    "@aws-cdk/aws-route53-targets:userPoolDomainNameMethodWithoutCustomResource": True,
    "@aws-cdk/aws-s3:createDefaultLoggingPolicy": True,
    "@aws-cdk/aws-s3:publicAccessBlockedByDefault": True,
    "@aws-cdk/aws-s3:setUniqueReplicationRoleName": True,
    "@aws-cdk/aws-secretsmanager:useAttachedSecretResourcePolicyForSecretTargetAttachments": True,
    "@aws-cdk/aws-signer:signingProfileNamePassedToCfn": True,
    "@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption": True,
    "@aws-cdk/aws-stepfunctions-tasks:enableEmrServicePolicyV2": True,
    "@aws-cdk/core:annotationsInValidationReport": True,
    "@aws-cdk/core:aspectPrioritiesMutating": True,
    "@aws-cdk/core:cfnIncludeRejectComplexResourceUpdateCreatePolicyIntrinsics": True,
    "@aws-cdk/core:defaultCrossStackReferences": "weak",
    "@aws-cdk/core:explicitStackTags": True,
    "@aws-cdk/core:includePrefixInUniqueNameGeneration": True,
    "@aws-cdk/core:validateAgainstDefaultRules": True,
    "@aws-cdk/s3-notifications:addS3TrustKeyPolicyForSnsSubscriptions": True,
}

FLAGS: dict[str, Flag] = {
    **_PINNED,
    **_POLICY_FORM,
    **_PARTITION_FORM,
    **_APP_ONLY,
    **{name: Flag(value, NO_EFFECT) for name, value in _NO_EFFECT_FLAGS.items()},
}
PINNED = {name: flag.value for name, flag in FLAGS.items() if flag.handling == PIN}
# Flags the kit relies on that CDK reads at the stack or app level (a construct cannot pin them):
# flag -> the value the kit needs. An app with another value is refused at synth.
STACK_LEVEL: dict[str, object] = {}


def is_feature_flag(key: str) -> bool:
    """A cdk.json context key that is a CDK feature flag (not the app's own settings)."""
    return key.startswith(("@aws-cdk/", "@aws-cdk-containers/"))


def pin_feature_flags(construct: Construct) -> None:
    """Set the kit's flags on ``construct`` (call it before the construct's first child exists),
    and refuse an app whose stack-level flags the kit cannot pin."""
    check_stack_flags(construct)
    for name, value in PINNED.items():
        construct.node.set_context(name, value)


def check_stack_flags(scope: Construct) -> None:
    for name, needed in STACK_LEVEL.items():
        value = scope.node.try_get_context(name)
        if value != needed:
            now = "unset" if value is None else json.dumps(value)
            raise ConfigError(
                f"feature flag {name} is {now}; the fan-out kit needs {json.dumps(needed)}: set "
                f'"{name}": {json.dumps(needed)} in your cdk.json context'
            )
