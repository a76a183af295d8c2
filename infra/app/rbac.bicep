// What the function app's identity may do, each role scoped as narrowly as the platform allows:
// nothing at resource group or subscription scope. Role IDs are Azure built-in roles, the same IDs the
// Flex Consumption samples assign (role assignment names are deterministic, so redeploying is idempotent).
//
// - Tables: Storage Table Data Contributor on the table service, not the account. Not on each table:
//   the app lists its tables at start (Query Tables: the role's tables/read) and creates those missing, and
//   the Functions host keeps its own tables in the same account (AzureWebJobsStorage__tableServiceUri).
// - Blobs (host storage, the deployment package): on the account, as in the samples. No queue role:
//   the app has no queue trigger, and the host keeps its keys and leases in blobs.
// - Key Vault Secrets User on oncegate-key-secret, not on the vault, granted by the deployment that writes
//   the secret (the first, or one putting back a lost vault) and by no other: after a rotation the first
//   secret is retired, its role removed and the secret, in the end, deleted (docs/deploy.md), and a
//   redeploy neither grants the role again nor stops at a secret that is gone. A rotation's new secret gets
//   its own assignment from the operator who creates it; a redeploy does not remove it (ARM's incremental
//   mode deletes nothing).
// - Key Vault Secrets User on each target secret named in targetSecretNames (issue 34), one by one, never
//   on the vault: the secrets Perform once sends to the targets operators declared (docs/operations.md).
// - The operators' principal (optional): Storage Table Data Reader on the table service, to read claims
//   in the portal. Nothing else: it reads no secret and writes nothing.
// - The store's marker (optional; azd: the deployer): Storage Table Data Contributor on the table service,
//   for azure.yaml's postprovision hook, which marks a new store with `oncegate store init --new-only`
//   (tools/store_mark.py). It reaches no further than deploying does: whoever deploys the app's code acts
//   as its identity, which holds this role already.

@description('Name of the storage account holding the host storage, the deployment package and the claim tables.')
param storageAccountName string

@description('Name of the Application Insights component the app sends telemetry to.')
param applicationInsightsName string

@description('Name of the Key Vault holding the HMAC key secret.')
param keyVaultName string

@description('Name of the Key Vault secret holding ONCEGATE_KEY_SECRET. It must exist.')
#disable-next-line secure-secrets-in-params // the secret's name, not its value
param keySecretName string

@description('Grant the app Key Vault Secrets User on keySecretName: true only for the deployment that writes the secret (newKeySecret given). A redeploy leaves the roles on key secrets as they are.')
param grantKeySecret bool

@description('Principal (object) ID of the function app\'s user-assigned identity.')
param principalId string

@description('Principal (object) ID of the deployer or an operators\' group, to read the claim tables; empty for none.')
param operatorPrincipalId string

@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
@description('What operatorPrincipalId is.')
param operatorPrincipalType string

@description('Principal (object) ID that marks the store at deployment (azd: the deployer), to write the claim tables; empty for none.')
param markerPrincipalId string

@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
@description('What markerPrincipalId is.')
param markerPrincipalType string

var storageTableDataContributor = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3' // OnceGate's tables and the host's; the marker
var storageTableDataReader = '76199698-9eea-4c19-bc75-cec21354c6b6' // the operators: claims in the portal
var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b' // host storage and the deployment package
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb' // telemetry signed in with Entra ID
var keyVaultSecretsUser = '4633458b-17de-408a-b874-0445c86b69e6' // the ONCEGATE_KEY_SECRET reference

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource tableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' existing = {
  parent: storage
  name: 'default'
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

@description('Names of the Key Vault secrets holding target secrets, each starting oncegate-target- (issue 34). Each must exist.')
param targetSecretNames array = []

resource keyVault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

// Assigning a role on a secret that does not exist fails the deployment: the deployment that grants it
// is the one that writes oncegate-key-secret (newKeySecret).
resource keySecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' existing = {
  parent: keyVault
  name: keySecretName
}

resource blobAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storage.id, principalId, storageBlobDataOwner)
  scope: storage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwner)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource tableAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(tableService.id, principalId, storageTableDataContributor)
  scope: tableService
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource monitoringAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, principalId, monitoringMetricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

// A target secret, as the key secret: the app reads each one named, and no other.
resource targetSecrets 'Microsoft.KeyVault/vaults/secrets@2023-07-01' existing = [
  for name in targetSecretNames: {
    parent: keyVault
    name: name
  }
]

resource targetSecretAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for (name, i) in targetSecretNames: {
    name: guid(targetSecrets[i].id, principalId, keyVaultSecretsUser)
    scope: targetSecrets[i]
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', keyVaultSecretsUser)
      principalId: principalId
      principalType: 'ServicePrincipal'
    }
  }
]

resource keySecretAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (grantKeySecret) {
  name: guid(keySecret.id, principalId, keyVaultSecretsUser)
  scope: keySecret
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', keyVaultSecretsUser)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource operatorTableAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(operatorPrincipalId)) {
  name: guid(tableService.id, operatorPrincipalId, storageTableDataReader)
  scope: tableService
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataReader)
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
  }
}

resource markerTableAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(markerPrincipalId)) {
  name: guid(tableService.id, markerPrincipalId, storageTableDataContributor)
  scope: tableService
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataContributor)
    principalId: markerPrincipalId
    principalType: markerPrincipalType
  }
}
