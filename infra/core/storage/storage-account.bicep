// The storage account: the Functions host's blobs, the container Flex Consumption deploys the app
// package from, and OnceGate's claim tables, the record of what was already done. Shared keys are off,
// so every client signs in with Microsoft Entra ID (the app's user-assigned identity).
//
// Zone-redundant by default: three copies in three zones of the region, written synchronously, so a
// zone lost loses no claim. Geo-redundant SKUs (GRS, GZRS) add an asynchronous copy in the paired
// region (docs/operations.md, "A regional failover"). A CanNotDelete lock keeps the account, and the
// claims with it, from being deleted by a mistaken `az group delete` or `azd down`; it also refuses
// deleting a role assignment on the account until it is lifted (docs/deploy.md, "The delete locks"). The table
// service's write and delete logs go to the Log Analytics workspace: who changed which claim row.

@minLength(3)
@maxLength(24)
@description('Name of the storage account: 3-24 lowercase letters and digits, unique in Azure.')
param name string

@description('Region of the storage account.')
param location string

@description('Tags of the storage account.')
param tags object

@description('Name of the blob container Flex Consumption deploys the app package from.')
param deploymentContainerName string

@description('Tables created up front for OnceGate\'s claims, conflicts and flow inventory.')
param tableNames array

@allowed([
  'Standard_ZRS'
  'Standard_GZRS'
  'Standard_RAGZRS'
  'Standard_LRS'
  'Standard_GRS'
  'Standard_RAGRS'
])
@description('Redundancy of the account (docs/operations.md, "A regional failover").')
param skuName string

@description('A CanNotDelete lock on the account.')
param deleteLock bool

@description('Resource ID of the Log Analytics workspace the table service\'s write and delete logs go to.')
param logAnalyticsWorkspaceId string

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: skuName
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    dnsEndpointType: 'Standard'
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: 'Allow'
    }
  }
}

resource blobServices 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobServices
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource tableServices 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource tables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [
  for tableName in tableNames: {
    parent: tableServices
    name: tableName
  }
]

// StorageWrite and StorageDelete only: StorageRead would log every claim lookup, the bulk of the traffic.
resource tableAudit 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'oncegate-audit'
  scope: tableServices
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logs: [
      {
        category: 'StorageWrite'
        enabled: true
      }
      {
        category: 'StorageDelete'
        enabled: true
      }
    ]
  }
}

resource lock 'Microsoft.Authorization/locks@2020-05-01' = if (deleteLock) {
  name: 'oncegate-keep-claims'
  scope: storage
  properties: {
    level: 'CanNotDelete'
    notes: 'Holds the OnceGate claims: what was already done. Remove the lock before deleting (docs/deploy.md).'
  }
}

@description('Name of the storage account.')
output name string = storage.name

@description('Table Storage endpoint of the account (its cloud\'s own suffix).')
output tableEndpoint string = storage.properties.primaryEndpoints.table
