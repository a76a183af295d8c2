// What the function app's identity may do, each role scoped to the one resource it is for: nothing
// at resource group or subscription scope. Role IDs are Azure built-in roles, the same IDs the Flex
// Consumption samples assign (role assignment names are deterministic, so redeploying is idempotent).

@description('Name of the storage account holding the host storage, the deployment package and the claim tables.')
param storageAccountName string

@description('Name of the Application Insights component the app sends telemetry to.')
param applicationInsightsName string

@description('Name of the Key Vault holding the HMAC key secret.')
param keyVaultName string

@description('Principal (object) ID of the function app\'s user-assigned identity.')
param principalId string

var storageTableDataContributor = '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3' // OnceGate's claims and conflicts
var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b' // host storage and the deployment package
var storageQueueDataContributor = '974c5e8b-45b9-4653-ba55-5f855dd0fb88' // host storage queues
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb' // telemetry signed in with Entra ID
var keyVaultSecretsUser = '4633458b-17de-408a-b874-0445c86b69e6' // the ONCEGATE_KEY_SECRET reference

var storageRoles = [
  storageTableDataContributor
  storageBlobDataOwner
  storageQueueDataContributor
]

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource keyVault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: keyVaultName
}

resource storageAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for roleId in storageRoles: {
    name: guid(storage.id, principalId, roleId)
    scope: storage
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
      principalId: principalId
      principalType: 'ServicePrincipal'
    }
  }
]

resource monitoringAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, principalId, monitoringMetricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

resource keyVaultAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(keyVault.id, principalId, keyVaultSecretsUser)
  scope: keyVault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', keyVaultSecretsUser)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}
