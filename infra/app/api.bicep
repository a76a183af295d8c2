// The OnceGate function app on the Flex Consumption plan (Linux, Python 3.11). It signs in to
// storage, Application Insights and Key Vault with its user-assigned identity: no connection string
// or key reaches its settings. In Entra mode, App Service authentication checks a Microsoft Entra ID
// token on every route but the health probe before a request reaches the app.

@description('Name of the function app, unique in Azure.')
param name string

@description('Region of the function app.')
param location string

@description('Tags of the function app; azd finds the app by its azd-service-name tag.')
param tags object

@description('Resource ID of the Flex Consumption plan.')
param planId string

@description('Resource ID of the user-assigned identity.')
param identityId string

@description('Client ID of the user-assigned identity.')
param identityClientId string

@description('Name of the storage account holding the host storage, the deployment package and the claim tables.')
param storageAccountName string

@description('Blob container Flex Consumption deploys the app package from.')
param deploymentContainerName string

@description('Name of the Application Insights component.')
param applicationInsightsName string

@description('URI of the HMAC key secret in Key Vault: ONCEGATE_KEY_SECRET of a site that has none yet. With the version the first deployment wrote; a redeploy\'s has none (it reads nothing of the secret).')
#disable-next-line secure-secrets-in-params // the secret's address, not its value
param keySecretUri string

@description('Name of the Key Vault holding the target secrets (issue 34).')
param keyVaultName string

@description('Names of the Key Vault secrets holding target secrets, each starting oncegate-target- (issue 34): each becomes ONCEGATE_TARGET_SECRET_<NAME>, a Key Vault reference the app\'s identity resolves.')
param targetSecretNames array = []

@description('ONCEGATE_TABLE_PREFIX: prefix of the claim tables.')
param tablePrefix string

@allowed([
  'key'
  'entra'
])
@description('ONCEGATE_AUTH: key (function keys) or entra (App Service authentication with Microsoft Entra ID).')
param authMode string

@description('Entra mode: application (client) ID of the OnceGate API app registration.')
param entraClientId string

@description('Entra mode: token audiences accepted besides the client ID and api://<client ID>.')
param entraAllowedAudiences array

@description('Entra mode: client IDs of the applications allowed to call; empty admits any application of the tenant.')
param entraAllowedApplications array

// The settings an operator may change. Each is '' unless the azd environment (or the deployment's
// parameters) gives it: then the app keeps the value it has, and a new app gets OnceGate's default.
// A value given here is written on every deployment. docs/operations.md, "Settings".
@description('ONCEGATE_LOG_LEVEL: DEBUG, INFO, WARNING or ERROR; empty keeps the app\'s (new app: INFO).')
@allowed(['', 'DEBUG', 'INFO', 'WARNING', 'ERROR'])
param logLevel string

@description('ONCEGATE_SENSITIVE_KEYS: reject or warn; empty keeps the app\'s (new app: reject).')
@allowed(['', 'reject', 'warn'])
param sensitiveKeys string

@description('ONCEGATE_SENSITIVE_DATA: reject or warn; empty keeps the app\'s (new app: reject).')
@allowed(['', 'reject', 'warn'])
param sensitiveData string

@description('ONCEGATE_REQUIRE_REGISTERED_FLOWS: true or false; empty keeps the app\'s (new app: false).')
@allowed(['', 'true', 'false'])
param requireRegisteredFlows string

@description('ONCEGATE_UNKNOWN_ALERT_MINUTES: minutes before an unknown outcome needs attention; empty keeps the app\'s (new app: 15).')
param unknownAlertMinutes string

@description('ONCEGATE_BULK_CONCURRENCY: items of bulk calls applied at once per instance, 1-64; empty keeps the app\'s (new app: 8).')
param bulkConcurrency string

@description('ONCEGATE_RETENTION_SCHEDULE: NCRONTAB schedule of the retention purge (seconds first, UTC); empty keeps the app\'s.')
param retentionSchedule string

@description('ONCEGATE_ATTENTION_SCHEDULE: NCRONTAB schedule of the attention watch (seconds first, UTC); empty keeps the app\'s.')
param attentionSchedule string

@minValue(40)
@maxValue(1000)
@description('Flex Consumption: the most instances the app scales out to.')
param maximumInstanceCount int

@allowed([
  2048
  4096
])
@description('Flex Consumption: memory of each instance, in MB.')
param instanceMemoryMB int

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

var endpoints = storage.properties.primaryEndpoints
// The account's endpoints end in '/'; docs/operations.md writes ONCEGATE_TABLES_ENDPOINT without it.
// No queue endpoint: the app has no queue trigger, and its identity holds no queue role (rbac.bicep).
var tablesEndpoint = endsWith(endpoints.table, '/') ? take(endpoints.table, length(endpoints.table) - 1) : endpoints.table

var appSettings = {
  // Host storage through the identity (no connection string: the account takes no shared keys).
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identityClientId
  AzureWebJobsStorage__blobServiceUri: endpoints.blob
  AzureWebJobsStorage__tableServiceUri: endpoints.table
  // Telemetry signed in with the identity: the component refuses the instrumentation key alone.
  APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsights.properties.ConnectionString
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
  // DefaultAzureCredential (the Table Storage client) picks the user-assigned identity by this client ID.
  AZURE_CLIENT_ID: identityClientId
  // OnceGate's own settings: oncegate/config.py and the settings table of docs/operations.md.
  ONCEGATE_STORE: 'tables'
  ONCEGATE_TABLES_ENDPOINT: tablesEndpoint
  ONCEGATE_TABLE_PREFIX: tablePrefix
  // ONCEGATE_KEY_SECRET and its rotation settings: keySecretSettings below.
  ONCEGATE_AUTH: authMode
  // Entra mode: the app validates each bearer token itself, against this tenant's published keys, for this
  // API's audiences (read only when ONCEGATE_AUTH is entra). The sign-in host follows the cloud deployed to.
  ONCEGATE_ENTRA_TENANT_ID: tenant().tenantId
  ONCEGATE_ENTRA_CLIENT_ID: entraClientId
  ONCEGATE_ENTRA_AUTHORITY: environment().authentication.loginEndpoint
  ONCEGATE_ENTRA_AUDIENCES: join(entraAllowedAudiences, ',')
  // The most of a request body the Functions host takes in, in bytes (its default is 100 MB): the app's own limits
  // (64 KiB, 6.5 MiB for a bulk call; oncegate/entrypoints/parse.py) refuse a larger body only once the host holds
  // all of it, so a caller sending 100 MB held that much of an instance's memory. 8 MiB is over the bulk limit:
  // every body up to it still gets the app's own 413, which names the limit.
  FUNCTIONS_REQUEST_BODY_SIZE_LIMIT: '8388608'
}

// What the app has now, read from the live site when the settings deploy. list() reads the settings
// after the site exists (the pattern of Azure Verified Modules' web/site/config); on a new site they
// are empty.
var liveSettings = list('${functionApp.id}/config/appsettings', '2024-04-01').properties

// An operator's setting: the value this deployment gives, else the one the app has, else the default.
// Governance: when an unknown outcome needs attention, and the two timer functions' NCRONTAB schedules
// (seconds first, UTC), which function_app.py reads as %ONCEGATE_..._SCHEDULE%: the host refuses a timer
// function whose setting is missing. What the app logs: oncegate/entrypoints/logs.py (host.json lets
// Information through for functions).
var operatorSettings = {
  ONCEGATE_SENSITIVE_KEYS: empty(sensitiveKeys) ? (liveSettings.?ONCEGATE_SENSITIVE_KEYS ?? 'reject') : sensitiveKeys
  ONCEGATE_SENSITIVE_DATA: empty(sensitiveData) ? (liveSettings.?ONCEGATE_SENSITIVE_DATA ?? 'reject') : sensitiveData
  ONCEGATE_REQUIRE_REGISTERED_FLOWS: empty(requireRegisteredFlows) ? (liveSettings.?ONCEGATE_REQUIRE_REGISTERED_FLOWS ?? 'false') : requireRegisteredFlows
  ONCEGATE_UNKNOWN_ALERT_MINUTES: empty(unknownAlertMinutes) ? (liveSettings.?ONCEGATE_UNKNOWN_ALERT_MINUTES ?? '15') : unknownAlertMinutes
  ONCEGATE_BULK_CONCURRENCY: empty(bulkConcurrency) ? (liveSettings.?ONCEGATE_BULK_CONCURRENCY ?? '8') : bulkConcurrency
  ONCEGATE_LOG_LEVEL: empty(logLevel) ? (liveSettings.?ONCEGATE_LOG_LEVEL ?? 'INFO') : logLevel
  ONCEGATE_RETENTION_SCHEDULE: empty(retentionSchedule) ? (liveSettings.?ONCEGATE_RETENTION_SCHEDULE ?? '0 30 2 * * *') : retentionSchedule
  ONCEGATE_ATTENTION_SCHEDULE: empty(attentionSchedule) ? (liveSettings.?ONCEGATE_ATTENTION_SCHEDULE ?? '0 */15 * * * *') : attentionSchedule
}

var entraAudiences = union([entraClientId, 'api://${entraClientId}'], entraAllowedAudiences)
var entraApplicationPolicy = empty(entraAllowedApplications) ? {} : {
  defaultAuthorizationPolicy: {
    allowedApplications: entraAllowedApplications
  }
}

// The issuer is the v2.0 endpoint: the app registration asks for v2 access tokens
// (api.requestedAccessTokenVersion = 2, docs/deploy.md), whose iss claim is this URL.
var entraAuthSettings = {
  platform: {
    enabled: true
  }
  globalValidation: {
    requireAuthentication: true
    unauthenticatedClientAction: 'Return401'
    excludedPaths: [
      '/api/health'
    ]
  }
  httpSettings: {
    requireHttps: true
  }
  identityProviders: {
    azureActiveDirectory: {
      enabled: true
      registration: {
        clientId: entraClientId
        openIdIssuer: '${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0'
      }
      validation: union({ allowedAudiences: entraAudiences }, entraApplicationPolicy)
    }
  }
  login: {
    tokenStore: {
      enabled: false
    }
  }
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: planId
    httpsOnly: true
    keyVaultReferenceIdentity: identityId
    siteConfig: {
      minTlsVersion: '1.2'
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${endpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'python'
        version: '3.11'
      }
    }
  }
}

// The key secret settings stay as the app has them: a redeploy, from any clone, machine or pipeline,
// never changes which secret the app hashes keys with. ONCEGATE_KEY_SECRET, and during a rotation
// ONCEGATE_KEY_SECRET_NEXT or ONCEGATE_KEY_SECRET_PREVIOUS (docs/operations.md), are changed on the app
// by an operator (docs/deploy.md). Only a site that has none yet, the first deployment, gets the vault's
// oncegate-key-secret, pinned to its current version; an empty setting is an unset one to the app.
// ONCEGATE_STORE_ID, the id of the store the app serves, is written by azure.yaml's postprovision hook
// (or the operator) once the store is marked (docs/deploy.md, step 4) and kept the same way: a wiped
// store is then refused.
var keySecretSettings = {
  ONCEGATE_KEY_SECRET: liveSettings.?ONCEGATE_KEY_SECRET ?? '@Microsoft.KeyVault(SecretUri=${keySecretUri})'
  ONCEGATE_KEY_SECRET_NEXT: liveSettings.?ONCEGATE_KEY_SECRET_NEXT ?? ''
  ONCEGATE_KEY_SECRET_PREVIOUS: liveSettings.?ONCEGATE_KEY_SECRET_PREVIOUS ?? ''
  ONCEGATE_STORE_ID: liveSettings.?ONCEGATE_STORE_ID ?? ''
}

// Each target secret the template names (issue 34): ONCEGATE_TARGET_SECRET_ and the name after its prefix, upper
// case, hyphens as underscores (oncegate.domain.target_declarations.secret_setting), a Key Vault reference to the
// secret's latest version, which the platform resolves with the app's identity (rbac.bicep grants it each one).
var targetSecretEntries = [
  for name in targetSecretNames: '"ONCEGATE_TARGET_SECRET_${toUpper(replace(substring(name, length('oncegate-target-')), '-', '_'))}": "@Microsoft.KeyVault(VaultName=${keyVaultName};SecretName=${name})"'
]
var targetSecretSettings = json('{${join(targetSecretEntries, ',')}}')

// The appsettings resource replaces the whole set: the live settings go first, so that a setting the
// template does not own (one an operator or the portal added) is kept, and the template's own win.
resource appSettingsConfig 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: functionApp
  name: 'appsettings'
  properties: union(liveSettings, appSettings, operatorSettings, keySecretSettings, targetSecretSettings)
}

// Deployed in key mode too, switched off, so moving from entra back to key really turns it off.
resource authSettingsConfig 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: functionApp
  name: 'authsettingsV2'
  properties: authMode == 'entra' ? entraAuthSettings : { platform: { enabled: false } }
  // Two config writes to one site at once can conflict; one after the other.
  dependsOn: [
    appSettingsConfig
  ]
}

// No basic (username and password) publishing credentials: deployments sign in with Microsoft Entra ID
// (azd and Core Tools do), and neither FTP nor the SCM site accepts a publishing password.
resource ftpPublishingCredentials 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: functionApp
  name: 'ftp'
  properties: {
    allow: false
  }
  dependsOn: [
    authSettingsConfig
  ]
}

resource scmPublishingCredentials 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: functionApp
  name: 'scm'
  properties: {
    allow: false
  }
  dependsOn: [
    ftpPublishingCredentials
  ]
}

@description('Name of the function app.')
output name string = functionApp.name

@description('Default host name of the function app.')
output defaultHostName string = functionApp.properties.defaultHostName
