// OnceGate on Azure: a Flex Consumption function app signed in everywhere with one user-assigned
// identity, its storage (host, deployment package, claim tables), a Key Vault holding the HMAC key
// secret, and monitoring. Layout and API versions follow the official Flex Consumption samples
// (Azure-Samples/functions-quickstart-python-http-azd, Azure/azure-quickstart-templates
// quickstarts/microsoft.web/function-app-flex-managed-identities); resources are declared here instead
// of in registry modules (br/public:...) so the template builds without network access.
//
// Deploy with `azd up` or `az deployment group create -f infra/main.bicep` (docs/deploy.md).
targetScope = 'resourceGroup'

@minLength(1)
@maxLength(64)
@description('Name of the environment (the azd environment name, or any short name): part of the unique token in every resource name, and the azd-env-name tag.')
param environmentName string

@minLength(1)
@description('Region of every resource; it must offer the Flex Consumption plan.')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string = resourceGroup().location

@minLength(1)
@maxLength(50)
@description('ONCEGATE_TABLE_PREFIX: the tables are <prefix>Claims, <prefix>Conflicts, <prefix>Flows, <prefix>Scopes and <prefix>Overlaps. Letters and digits, starting with a letter.')
param tablePrefix string = 'OnceGate'

// No default on purpose: a newGuid() default would be drawn again on every deployment, and a new
// secret orphans every existing claim. azd generates the value once and keeps it in its environment.
@secure()
@minLength(32)
@description('ONCEGATE_KEY_SECRET, stored in Key Vault: the HMAC secret of claim ids, at least 32 characters. azd generates it once and keeps it in the environment; with az, generate it once and pass the same value on every deployment. A different value orphans every existing claim.')
@metadata({
  azd: {
    type: 'generate'
    config: {
      length: 64
      noSpecial: true
    }
  }
})
param keySecret string

@allowed([
  'key'
  'entra'
])
@description('ONCEGATE_AUTH: how callers prove who they are. key: a function key in x-functions-key. entra: a Microsoft Entra ID access token, checked by App Service authentication before the app sees the request.')
param authMode string = 'key'

@description('Entra mode: application (client) ID of the OnceGate API app registration (docs/deploy.md creates it). Ignored in key mode.')
param entraClientId string = ''

@description('Entra mode: token audiences accepted besides the API\'s client ID and api://<client ID>.')
param entraAllowedAudiences array = []

@description('Entra mode: client IDs of the applications allowed to call, such as the Power Platform connector\'s app registration. Empty admits any application of the tenant that holds a token for the API.')
param entraAllowedApplications array = []

@minValue(40)
@maxValue(1000)
@description('Flex Consumption: the most instances the app scales out to.')
param maximumInstanceCount int = 100

@allowed([
  2048
  4096
])
@description('Flex Consumption: memory of each instance, in MB.')
param instanceMemoryMB int = 2048

@description('Key Vault purge protection. Irreversible once on: a deleted vault and its secret stay recoverable, and cannot be purged, for the retention period.')
param enablePurgeProtection bool = true

@minValue(7)
@maxValue(90)
@description('Key Vault: days a deleted vault or secret stays recoverable. Fixed when the vault is created.')
param softDeleteRetentionInDays int = 90

var resourceToken = toLower(uniqueString(subscription().id, resourceGroup().id, location, environmentName))
var tags = {
  'azd-env-name': environmentName
}
var functionAppName = 'func-oncegate-${resourceToken}'
var deploymentContainerName = 'app-package-${take(functionAppName, 32)}-${take(toLower(uniqueString(functionAppName, resourceToken)), 7)}'
// oncegate.stores.tables.table_names(prefix); the app also creates them at start if missing.
var tableNames = [
  '${tablePrefix}Claims'
  '${tablePrefix}Conflicts'
  '${tablePrefix}Flows'
  '${tablePrefix}Scopes'
  '${tablePrefix}Overlaps'
]
var keySecretName = 'oncegate-key-secret'

resource apiIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-oncegate-${resourceToken}'
  location: location
  tags: tags
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: 'plan-oncegate-${resourceToken}'
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    tier: 'FlexConsumption'
    name: 'FC1'
  }
  properties: {
    reserved: true
  }
}

module storage 'core/storage/storage-account.bicep' = {
  name: 'storage'
  params: {
    name: 'st${resourceToken}'
    location: location
    tags: tags
    deploymentContainerName: deploymentContainerName
    tableNames: tableNames
  }
}

module monitoring 'core/monitor/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    logAnalyticsName: 'log-${resourceToken}'
    applicationInsightsName: 'appi-${resourceToken}'
    location: location
    tags: tags
  }
}

module keyVault 'core/security/keyvault.bicep' = {
  name: 'keyvault'
  params: {
    name: 'kv-${resourceToken}'
    location: location
    tags: tags
    keySecretName: keySecretName
    keySecret: keySecret
    enablePurgeProtection: enablePurgeProtection
    softDeleteRetentionInDays: softDeleteRetentionInDays
  }
}

module rbac 'app/rbac.bicep' = {
  name: 'rbac'
  params: {
    storageAccountName: storage.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    keyVaultName: keyVault.outputs.name
    principalId: apiIdentity.properties.principalId
  }
}

module api 'app/api.bicep' = {
  name: 'api'
  params: {
    name: functionAppName
    location: location
    tags: union(tags, { 'azd-service-name': 'api' })
    planId: plan.id
    identityId: apiIdentity.id
    identityClientId: apiIdentity.properties.clientId
    storageAccountName: storage.outputs.name
    deploymentContainerName: deploymentContainerName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    keySecretUri: keyVault.outputs.keySecretUri
    tablePrefix: tablePrefix
    authMode: authMode
    entraClientId: entraClientId
    entraAllowedAudiences: entraAllowedAudiences
    entraAllowedApplications: entraAllowedApplications
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
  }
  // The host reads storage, the Key Vault reference and App Insights with the identity from its first start.
  dependsOn: [
    rbac
  ]
}

@description('Host name of the function app: the connector\'s functionAppHost connection parameter.')
output functionAppHost string = api.outputs.defaultHostName

@description('Name of the function app: func azure functionapp publish <name>, az functionapp keys list -n <name>.')
output functionAppName string = api.outputs.name

@description('Name of the storage account holding the claim tables.')
output storageAccountName string = storage.outputs.name

@description('Name of the Key Vault holding oncegate-key-secret.')
output keyVaultName string = keyVault.outputs.name
