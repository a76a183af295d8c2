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

// The regions that offer the Flex Consumption plan (Microsoft's Flex Consumption azd template lists the
// same; `az functionapp list-flexconsumption-locations` gives today's list). ARM refuses any other
// value before anything is deployed, naming these. A zone-redundant storage SKU also needs zones in the
// region: regionsWithoutZones below.
@minLength(1)
@allowed([
  'australiaeast'
  'australiasoutheast'
  'brazilsouth'
  'canadacentral'
  'centralindia'
  'centralus'
  'eastasia'
  'eastus'
  'eastus2'
  'francecentral'
  'germanywestcentral'
  'italynorth'
  'japaneast'
  'koreacentral'
  'northcentralus'
  'northeurope'
  'norwayeast'
  'southafricanorth'
  'southcentralus'
  'southeastasia'
  'southindia'
  'spaincentral'
  'swedencentral'
  'uaenorth'
  'uksouth'
  'ukwest'
  'westcentralus'
  'westeurope'
  'westus'
  'westus2'
  'westus3'
])
@description('Region of every resource: one that offers the Flex Consumption plan (and, for a zone-redundant storageSku, zone-redundant storage).')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string = resourceGroup().location

@minLength(1)
@maxLength(50)
@description('ONCEGATE_TABLE_PREFIX: the tables are <prefix>Claims, <prefix>Conflicts, <prefix>Flows, <prefix>Scopes, <prefix>Overlaps, <prefix>Keys and <prefix>Targets. Letters and digits, starting with a letter.')
param tablePrefix string = 'OnceGate'

@description('Names of the Key Vault secrets holding target secrets for Perform once (issue 34), each starting oncegate-target- and written to the vault before the deployment (docs/operations.md, Targets): the app gets read access to each, one by one, and a setting ONCEGATE_TARGET_SECRET_<NAME> that references it. Never the key secret.')
param targetSecretNames array = []

// Written into Key Vault only when given. No generated value and no newGuid() default: either would
// be drawn again by a deployment from another clone, machine or pipeline, and a new secret orphans
// every existing claim. The first deployment gives it; every later one leaves it empty (docs/deploy.md).
@secure()
@description('A value for ONCEGATE_KEY_SECRET (the HMAC secret of claim ids, at least 32 characters) to write into the vault as oncegate-key-secret. Give it on the first deployment only, or to put back a lost secret. Empty, the default: the vault\'s secret stays as it is, so a redeploy from any clone, machine or pipeline keeps it. A value given to a deployment that holds claims replaces the secret and orphans every claim.')
param newKeySecret string = ''

@allowed([
  'key'
  'entra'
])
@description('ONCEGATE_AUTH: how callers prove who they are. key: a function key in x-functions-key. entra: a Microsoft Entra ID access token, checked by App Service authentication before the app sees the request.')
param authMode string = 'key'

@description('Entra mode: application (client) ID of the OnceGate API app registration (docs/deploy.md creates it). Required in entra mode: the deployment fails without it. Ignored in key mode.')
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

@allowed([
  'Standard_ZRS'
  'Standard_GZRS'
  'Standard_RAGZRS'
  'Standard_LRS'
  'Standard_GRS'
  'Standard_RAGRS'
])
@description('Redundancy of a new storage account holding the claims. Standard_ZRS, the default: three synchronous copies in three zones of the region. Standard_GZRS (or RAGZRS): also an asynchronous copy in the paired region, for a regional failover (docs/operations.md). LRS and GRS keep the region\'s copies in one datacentre. Read on the first deployment only: every later one keeps the account\'s live SKU (a conversion or a failover changes it, docs/operations.md). azd: ONCEGATE_STORAGE_SKU.')
param storageSku string = 'Standard_ZRS'

@description('Flex Consumption: spread the app\'s instances over availability zones. Only in regions where Flex Consumption supports zone redundancy, and fixed when the plan is created. azd: ONCEGATE_ZONE_REDUNDANT.')
param zoneRedundant bool = false

@description('CanNotDelete locks on the storage account (the claims) and the Key Vault (the key secret): deleting either, or the resource group, or a role assignment on either, fails until the lock is lifted (docs/deploy.md, "The delete locks"). Creating a lock needs Microsoft.Authorization/locks/write: Owner, or User Access Administrator. A deployer with Contributor and Role Based Access Control Administrator sets it false, and an owner places the locks. azd: ONCEGATE_DELETE_LOCKS.')
param deleteLocks bool = true

@description('ONCEGATE_LOG_LEVEL: DEBUG, INFO, WARNING or ERROR. Empty: the app keeps the level it has (a new app: INFO). azd: ONCEGATE_LOG_LEVEL.')
@allowed(['', 'DEBUG', 'INFO', 'WARNING', 'ERROR'])
param logLevel string = ''

@description('ONCEGATE_SENSITIVE_KEYS: reject or warn. Empty: the app keeps its value (a new app: reject). azd: ONCEGATE_SENSITIVE_KEYS.')
@allowed(['', 'reject', 'warn'])
param sensitiveKeys string = ''

@description('ONCEGATE_SENSITIVE_DATA: reject or warn. Empty: the app keeps its value (a new app: reject). azd: ONCEGATE_SENSITIVE_DATA.')
@allowed(['', 'reject', 'warn'])
param sensitiveData string = ''

@description('ONCEGATE_REQUIRE_REGISTERED_FLOWS: true or false. Empty: the app keeps its value (a new app: false). azd: ONCEGATE_REQUIRE_REGISTERED_FLOWS.')
@allowed(['', 'true', 'false'])
param requireRegisteredFlows string = ''

@description('ONCEGATE_UNKNOWN_ALERT_MINUTES. Empty: the app keeps its value (a new app: 15). azd: ONCEGATE_UNKNOWN_ALERT_MINUTES.')
param unknownAlertMinutes string = ''

@description('ONCEGATE_BULK_CONCURRENCY: items of bulk calls applied at once per instance, 1-64. Empty: the app keeps its value (a new app: 8). azd: ONCEGATE_BULK_CONCURRENCY.')
param bulkConcurrency string = ''

@description('ONCEGATE_RETENTION_SCHEDULE, an NCRONTAB schedule. Empty: the app keeps its value (a new app: 0 30 2 * * *). azd: ONCEGATE_RETENTION_SCHEDULE.')
param retentionSchedule string = ''

@description('ONCEGATE_ATTENTION_SCHEDULE, an NCRONTAB schedule that runs at least daily (its last three fields *). Empty: the app keeps its value (a new app: 0 */15 * * * *). azd: ONCEGATE_ATTENTION_SCHEDULE.')
param attentionSchedule string = ''

@description('Principal (object) ID of the deployer or of an operators\' group, given Storage Table Data Reader on the table service so that claims can be read in the portal. azd passes the signed-in principal (AZURE_PRINCIPAL_ID). Empty: no one.')
param principalId string = ''

@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
@description('What principalId is: User, Group, or ServicePrincipal (a pipeline\'s identity).')
param principalType string = 'User'

@description('Principal (object) ID given Storage Table Data Contributor on the table service, so that azure.yaml\'s postprovision hook can mark a new store with `oncegate store init --new-only` and pin its id on the app (docs/deploy.md). azd passes the signed-in principal (AZURE_PRINCIPAL_ID). Empty: no one; then mark the store by hand (docs/deploy.md, step 4).')
param storeMarkerPrincipalId string = ''

@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
@description('What storeMarkerPrincipalId is.')
param storeMarkerPrincipalType string = 'User'

@description('E-mail address the OnceGate alerts go to (claims needing attention, conflicts open too long, 503s, a key secret the store does not know). Empty: the alerts show in the portal only. azd: ONCEGATE_ALERT_EMAIL.')
param alertEmail string = ''

@minValue(1)
@maxValue(720)
@description('Hours a conflict may stay open before its alert fires.')
param conflictAlertHours int = 24

@minValue(1)
@description('503 answers in 15 minutes beyond which the 503 alert fires.')
param unavailableAlertThreshold int = 10

@minValue(30)
@maxValue(730)
@description('Days the audit trail (Key Vault\'s AuditEvent in AzureDiagnostics, the table service\'s writes and deletes in StorageTableLogs) can be queried in the workspace. The rest of the workspace keeps 30 days. azd: ONCEGATE_AUDIT_RETENTION_DAYS.')
param auditRetentionDays int = 90

@minValue(0)
@maxValue(4383)
@description('Total days the audit trail is kept, long-term retention (the archive: kept at a lower price, read back with a search job or a restore) included. 0, or a value below auditRetentionDays: no long-term retention. At most 4383 (12 years). azd: ONCEGATE_AUDIT_ARCHIVE_DAYS.')
param auditTotalRetentionDays int = 0

@description('Key Vault purge protection. Irreversible once on: a deleted vault and its secret stay recoverable, and cannot be purged, for the retention period.')
param enablePurgeProtection bool = true

@minValue(7)
@maxValue(90)
@description('Key Vault: days a deleted vault or secret stays recoverable. Fixed when the vault is created.')
param softDeleteRetentionInDays int = 90

@description('Logic Apps (Consumption): also deploy the OnceGate custom connector, a connection to this app and a sample workflow (app/logicapps.bicep; docs/deploy.md, "Logic Apps in one step"). azd: ONCEGATE_LOGIC_APPS.')
param deployLogicApps bool = false

@description('Logic Apps in entra mode: application (client) ID of the connector\'s app registration (docs/deploy.md, step 2). Ignored in key mode.')
param logicAppsConnectorClientId string = ''

@secure()
@description('Logic Apps in entra mode: a client secret of the connector\'s app registration, for the connection\'s sign-in. Ignored in key mode.')
param logicAppsConnectorClientSecret string = ''

var resourceToken = toLower(uniqueString(subscription().id, resourceGroup().id, location, environmentName))
var tags = {
  'azd-env-name': environmentName
}
var functionAppName = 'func-oncegate-${resourceToken}'
var deploymentContainerName = 'app-package-${take(functionAppName, 32)}-${take(toLower(uniqueString(functionAppName, resourceToken)), 7)}'
// oncegate.stores.tables.store.table_names(prefix); the app also creates them at start if missing.
var tableNames = [
  '${tablePrefix}Claims'
  '${tablePrefix}Conflicts'
  '${tablePrefix}Flows'
  '${tablePrefix}Scopes'
  '${tablePrefix}Overlaps'
  '${tablePrefix}Keys'
  '${tablePrefix}Targets'
]
var keySecretName = 'oncegate-key-secret'

// The first deployment of an environment is the one given newKeySecret (docs/deploy.md, step 3); every
// later one, from any clone, machine or pipeline, leaves it empty and redeploys resources that exist.
// A redeploy keeps the storage account's live SKU and region, as it keeps the app's settings: after a
// conversion (az storage account update --sku Standard_GZRS) or a failover (which moves the account to
// the paired region as LRS), re-sending storageSku and location would undo the one or fail on the other.
// ARM has no "does it exist" test; a marker written by the deployment would need a resource of its own.
// Putting back a lost secret (newKeySecret on an existing environment) reads storageSku instead: give it
// the account's SKU then (docs/deploy.md, "When the key secret is lost").
var redeploy = empty(newKeySecret)
var storageAccountName = 'st${resourceToken}'

// The storage account as it is, read only on a redeploy (ARM's if() evaluates the chosen branch alone).
resource liveStorage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

// Flex Consumption regions without zone-redundant storage, each with a region near it that has both
// (learn.microsoft.com/azure/storage/common/redundancy-regions-zrs). A new account with a zone-redundant
// SKU there stops the deployment before anything is created: the guard's deployment name says which
// region to use instead, or choose storageSku Standard_LRS (or GRS) knowingly.
var regionsWithoutZones = {
  australiasoutheast: 'australiaeast'
  northcentralus: 'centralus'
  southindia: 'centralindia'
  ukwest: 'uksouth'
  westcentralus: 'westus2'
  westus: 'westus2'
}
var zoneRedundantSkus = [
  'Standard_ZRS'
  'Standard_GZRS'
  'Standard_RAGZRS'
]
var zonesMissing = !redeploy && contains(zoneRedundantSkus, storageSku) && contains(regionsWithoutZones, location)

// Flex Consumption regions without a paired region, so without geo-redundant storage
// (learn.microsoft.com/azure/reliability/regions-paired, nonpaired regions; .../storage/common/redundancy-regions-gzrs
// lists neither), each with a region near it that has Flex Consumption, zones and a pair. A new geo-redundant
// account there stops the same way (its deployment's name says where to go), or choose Standard_ZRS there.
var regionsWithoutPair = {
  italynorth: 'germanywestcentral'
  spaincentral: 'francecentral'
}
var geoRedundantSkus = [
  'Standard_GRS'
  'Standard_RAGRS'
  'Standard_GZRS'
  'Standard_RAGZRS'
]
var pairMissing = !redeploy && contains(geoRedundantSkus, storageSku) && contains(regionsWithoutPair, location)
// The guard's deployment name is its message; each map is read only where the region is in it.
var zonesGuard = 'no-zones-in-${location}-use-${zonesMissing ? regionsWithoutZones[location] : location}'
var pairGuard = 'no-paired-region-for-${location}-use-${pairMissing ? regionsWithoutPair[location] : location}'

module zonesRequired 'core/required.bicep' = if (zonesMissing || pairMissing) {
  name: zonesMissing ? zonesGuard : pairGuard
  params: {
    // Empty, so ARM refuses it, and not a literal, which the compiler would refuse before ARM names the guard.
    value: take(location, 0)
  }
}

// Entra mode needs the API's app registration: the module below stops the deployment without it, and the
// app waits for it (ARM checks a module's @minLength when the module deploys: docs/deploy.md, "What could
// not be verified here"). The key secret's length is checked the same way, where it is written
// (core/security/key-secret.bicep).
// A target secret outside its prefix (the key secret, or a secret of anything else in the vault) stops the
// deployment before the app is granted it: the guard's deployment name says which prefix to use.
var strayTargetSecrets = filter(targetSecretNames, name => !startsWith(name, 'oncegate-target-'))
module targetSecretsPrefixed 'core/required.bicep' = if (!empty(strayTargetSecrets)) {
  name: 'targetSecretNames-must-start-oncegate-target'
  params: {
    value: take(location, 0)
  }
}

// The attention alert reads the watch's last run within its two-day query range (core/monitor/alerts.bicep):
// a schedule that runs at least daily (six NCRONTAB fields, every day of every month on every weekday) always
// has one there. A slower one would let the alert resolve between runs and fire again at the next: it stops
// the deployment before the app is given it. Empty, the app keeps its value (docs/deploy.md).
var attentionRunsDaily = length(split(attentionSchedule, ' ')) == 6 && endsWith(attentionSchedule, ' * * *')
module attentionScheduleDaily 'core/required.bicep' = if (!empty(attentionSchedule) && !attentionRunsDaily) {
  name: 'attentionSchedule-must-run-every-day'
  params: {
    value: take(location, 0)
  }
}

module entraClientIdRequired 'core/required.bicep' = if (authMode == 'entra') {
  name: 'authMode-entra-needs-entraClientId'
  params: {
    value: entraClientId
  }
}

resource apiIdentity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-oncegate-${resourceToken}'
  location: location
  tags: tags
  // The region guard runs first: every other resource waits for this one, the plan or monitoring.
  dependsOn: [
    zonesRequired
  ]
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
    zoneRedundant: zoneRedundant
  }
  dependsOn: [
    zonesRequired
  ]
}

module storage 'core/storage/storage-account.bicep' = {
  name: 'storage'
  params: {
    name: storageAccountName
    location: redeploy ? liveStorage.location : location
    tags: tags
    deploymentContainerName: deploymentContainerName
    tableNames: tableNames
    skuName: redeploy ? liveStorage.sku.name : storageSku
    deleteLock: deleteLocks
    logAnalyticsWorkspaceId: monitoring.outputs.logAnalyticsWorkspaceId
  }
}

module monitoring 'core/monitor/monitoring.bicep' = {
  name: 'monitoring'
  params: {
    logAnalyticsName: 'log-${resourceToken}'
    applicationInsightsName: 'appi-${resourceToken}'
    location: location
    tags: tags
    auditRetentionDays: auditRetentionDays
    auditTotalRetentionDays: auditTotalRetentionDays
  }
  dependsOn: [
    zonesRequired
  ]
}

// What the portal shows of OnceGate: a workbook of the app's telemetry events and alerts when a person
// must act (docs/operations.md, "OnceGate in the Azure portal").
module workbook 'core/monitor/workbook.bicep' = {
  name: 'workbook'
  params: {
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    logAnalyticsWorkspaceId: monitoring.outputs.logAnalyticsWorkspaceId
    location: location
    tags: tags
  }
}

module alerts 'core/monitor/alerts.bicep' = {
  name: 'alerts'
  params: {
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    location: location
    tags: tags
    alertEmail: alertEmail
    conflictAlertHours: conflictAlertHours
    unavailableAlertThreshold: unavailableAlertThreshold
  }
}

module keyVault 'core/security/keyvault.bicep' = {
  name: 'keyvault'
  params: {
    name: 'kv-${resourceToken}'
    location: location
    tags: tags
    keySecretName: keySecretName
    newKeySecret: newKeySecret
    enablePurgeProtection: enablePurgeProtection
    softDeleteRetentionInDays: softDeleteRetentionInDays
    deleteLock: deleteLocks
    logAnalyticsWorkspaceId: monitoring.outputs.logAnalyticsWorkspaceId
  }
}

module rbac 'app/rbac.bicep' = {
  name: 'rbac'
  params: {
    storageAccountName: storage.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    keyVaultName: keyVault.outputs.name
    keySecretName: keySecretName
    grantKeySecret: !redeploy
    targetSecretNames: targetSecretNames
    principalId: apiIdentity.properties.principalId
    operatorPrincipalId: principalId
    operatorPrincipalType: principalType
    markerPrincipalId: storeMarkerPrincipalId
    markerPrincipalType: storeMarkerPrincipalType
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
    keyVaultName: keyVault.outputs.name
    targetSecretNames: targetSecretNames
    tablePrefix: tablePrefix
    authMode: authMode
    entraClientId: entraClientId
    entraAllowedAudiences: entraAllowedAudiences
    entraAllowedApplications: entraAllowedApplications
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    logLevel: logLevel
    sensitiveKeys: sensitiveKeys
    sensitiveData: sensitiveData
    requireRegisteredFlows: requireRegisteredFlows
    unknownAlertMinutes: unknownAlertMinutes
    bulkConcurrency: bulkConcurrency
    retentionSchedule: retentionSchedule
    attentionSchedule: attentionSchedule
  }
  // The host reads storage, the Key Vault references and App Insights with the identity from its first
  // start; in entra mode the app waits for the check that its client ID is given.
  dependsOn: [
    rbac
    entraClientIdRequired
    targetSecretsPrefixed
    attentionScheduleDaily
  ]
}

module logicApps 'app/logicapps.bicep' = if (deployLogicApps) {
  name: 'logicapps'
  params: {
    location: location
    tags: tags
    resourceToken: resourceToken
    functionAppName: api.outputs.name
    authMode: authMode
    entraClientId: entraClientId
    connectorClientId: logicAppsConnectorClientId
    connectorClientSecret: logicAppsConnectorClientSecret
  }
}

@description('Host name of the function app: the connector\'s functionAppHost connection parameter.')
output functionAppHost string = api.outputs.defaultHostName

@description('Name of the function app: func azure functionapp publish <name>, az functionapp keys list -n <name>.')
output functionAppName string = api.outputs.name

@description('Name of the storage account holding the claim tables.')
output storageAccountName string = storage.outputs.name

@description('Name of the Key Vault holding oncegate-key-secret.')
output keyVaultName string = keyVault.outputs.name

@description('Principal (object) ID of the app\'s identity: the assignee of Key Vault Secrets User on a new key secret (docs/deploy.md).')
output identityPrincipalId string = apiIdentity.properties.principalId

// Read by azure.yaml's postdeploy hook (tools/logicapps_connection.py), which deploys the Logic Apps
// connection and sample workflow once the code is published: azd keeps outputs in the environment.
@description('Name of the function app, for the postdeploy hook.')
output SERVICE_API_NAME string = api.outputs.name

// Read by azure.yaml's postprovision hook (tools/store_mark.py), which marks a new store and pins its id.
@description('Table Storage endpoint of the claim tables, for the postprovision hook.')
output STORE_TABLES_ENDPOINT string = storage.outputs.tableEndpoint

@description('Prefix of the claim tables, for the postprovision hook.')
output STORE_TABLE_PREFIX string = tablePrefix

@description('Name of the Logic Apps custom connector; empty when deployLogicApps is off.')
output LOGIC_APPS_CONNECTOR_NAME string = deployLogicApps ? logicApps.outputs.connectorName : ''
